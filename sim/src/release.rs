//! The OpenShift release the world plays, a leaf every floor may read: the cluster's operators
//! report it, the machine-config operator publishes its boot images, and Azure's Marketplace and
//! the release's blob store serve those images.

/// The release the world's cluster runs.
pub const RELEASE: &str = "4.22.3";
/// The RHCOS build of its boot images (the Marketplace image version and the VHD's name).
pub const RHCOS_BUILD: &str = "422.94.202511041021-0";
