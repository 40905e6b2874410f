cluster {
  infrastructure_name = "t-1"
  api_url = 
}
aws { region = "us-east-1" }
