//! The AWS provider: the VPN side of the link in the cluster's VPC, through aws-sdk-ec2.
