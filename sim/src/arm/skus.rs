//! The VM sizes the world knows: what a size is (vCPUs, memory, GPUs, the Hyper-V generations it
//! boots), for the kubelet's capacity on a Node and for the checks that need a size's facts.
//!
//! Each figure is from the size's page on Microsoft Learn (`virtual-machines/sizes/...`, the
//! "Host specifications" and "Feature support" tables) and the resource SKU capability names
//! (`vCPUs`, `MemoryGB`, `GPUs`, `HyperVGenerations`) of `Microsoft.Compute/skus`
//! (`ResourceSkuCapabilities`). A size missing here is unknown to the world (sim/README.md).

/// One VM size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub name: &'static str,
    /// The quota family (`Microsoft.Compute/locations/{l}/usages` names it, and the resource SKU's `family`).
    pub family: &'static str,
    pub vcpus: u32,
    pub memory_gib: u32,
    pub gpus: u32,
    /// `HyperVGenerations`: "V1", "V2" or "V1,V2".
    pub generations: &'static str,
}

const fn size(
    name: &'static str,
    family: &'static str,
    vcpus: u32,
    memory_gib: u32,
    gpus: u32,
    generations: &'static str,
) -> Size {
    Size { name, family, vcpus, memory_gib, gpus, generations }
}

/// The catalog: Dsv5 (`sizes/general-purpose/dsv5-series`), NCasT4_v3 (`sizes/gpu-accelerated/ncast4v3-series`),
/// NC A100 v4 (`nca100v4-series`), ND A100 v4 (`nda100-v4-series`), NDm A100 v4 (`ndm-a100-v4-series`).
pub const SIZES: &[Size] = &[
    size("Standard_D4s_v5", "standardDSv5Family", 4, 16, 0, "V1,V2"),
    size("Standard_D8s_v5", "standardDSv5Family", 8, 32, 0, "V1,V2"),
    size("Standard_NC4as_T4_v3", "standardNCASv3_T4Family", 4, 28, 1, "V1,V2"),
    size("Standard_NC8as_T4_v3", "standardNCASv3_T4Family", 8, 56, 1, "V1,V2"),
    size("Standard_NC24ads_A100_v4", "StandardNCADSA100v4Family", 24, 220, 1, "V2"),
    size("Standard_ND96asr_v4", "standardNDASv4_A100Family", 96, 900, 8, "V2"),
    size("Standard_ND96amsr_A100_v4", "standardNDAMSv4_A100Family", 96, 1900, 8, "V2"),
];

/// The size of that name (ARM compares size names without regard to case).
pub fn find(name: &str) -> Option<&'static Size> {
    SIZES.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

impl Size {
    /// Whether the size boots only Generation 2 images.
    pub fn gen2_only(&self) -> bool {
        self.generations == "V2"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_found_without_regard_to_case_and_know_their_generation() {
        let nd = find("standard_nd96asr_v4").expect("ND96asr_v4");
        assert_eq!((nd.vcpus, nd.memory_gib, nd.gpus), (96, 900, 8));
        assert!(nd.gen2_only());
        assert!(!find("Standard_NC4as_T4_v3").unwrap().gen2_only());
        assert!(find("Standard_Z1").is_none());
    }
}
