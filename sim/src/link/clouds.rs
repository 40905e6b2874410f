//! Both clouds at once, borrowed: what the link (and every floor above it) reads.

use crate::arm::Arm;
use crate::aws::Aws;
use crate::world::World;

/// The world with its two clouds, borrowed for one reading.
#[derive(Clone, Copy)]
pub struct Clouds<'a> {
    pub world: &'a World,
    pub arm: &'a Arm,
    pub aws: &'a Aws,
}

impl<'a> Clouds<'a> {
    /// One EC2 request's view: the AWS side, the world, and the tunnels as the link judges them.
    pub fn ec2(&'a self) -> crate::aws::Ec2<'a> {
        crate::aws::Ec2 { aws: self.aws, world: self.world, tunnels: self }
    }
}
