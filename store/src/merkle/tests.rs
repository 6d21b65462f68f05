//! The standard vectors (C2SP's CCTV `merkle` set: tree heads over the leaves "a".."p",
//! valid and mutated inclusion and consistency proofs) and properties over every shape.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use proptest::prelude::*;

use super::*;

fn h(b64: &str) -> TreeHash {
    let bytes = STANDARD.decode(b64).expect("vector is base64");
    TreeHash(bytes.try_into().expect("vector is 32 bytes"))
}

/// `(leaf data, leaf hash, root of the tree ending with this leaf)`.
const HEADS: [(&str, &str, &str); 16] = [
    (
        "a",
        "Aippeebat6pa5MPl5F9+l3ESp+Y1k4INvsHsc4ok+Tw=",
        "Aippeebat6pa5MPl5F9+l3ESp+Y1k4INvsHsc4ok+Tw=",
    ),
    (
        "b",
        "V+s1YV1H807HFMrN9f10YIpejhAnJOgLJLKHwMJ7ajE=",
        "sTeYX/SE+2ANuTEHx3sDZcgNePW0Kd7Q/Zc2HQd5mes=",
    ),
    (
        "c",
        "WX/LMSgtNGVMIA00GPylcFxkjr8ybsc9jd7xGEH4dtg=",
        "NmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=",
    ),
    (
        "d",
        "0HDcW42prqfcD1rUwp2JllIABZyaDOyjq9XaJJLctx0=",
        "MzdqO9Y+mZNwioTd/mworli4NQXdH+1xG9kk7FpiOfA=",
    ),
    (
        "e",
        "KCSnzNosqnIMhcn7oei1tzXuz9sDh45Pjf5sNiUDC8Q=",
        "/hSlQm+9cMD6c/UjQq/tDaC9I8SDhmLM9riKMHDq2Xs=",
    ),
    (
        "f",
        "9aBtPFKTcInFG3xsHMGUjM3FWBMosuu1eOjMpmp7UiE=",
        "4Gn8EuIxzP1FFr8WF5Rfs8zVzIkQ2S1iZSifCI93f90=",
    ),
    (
        "g",
        "WusZboNZgjG0XGHz4MWg/aSbDU+GpttfiTqszPUU+pk=",
        "SuGRk59UjZk0dAuI3qLFy4m7iHD8RQXNed7Gu/qu6cs=",
    ),
    (
        "h",
        "5ZNJCjYKyBBOhCFBxAWWA+DZC3nemeW2tvBa/hSUVlk=",
        "pdrGsf8dyhPc+UI9y/G7tNvOfoy/f0wBTPQMbIFxor0=",
    ),
    (
        "i",
        "Dyx/flCr984iAK5h865CnKnzHRx81X6UJI8Lm11PrAM=",
        "/UrtYHiqdk8U29MJmd7YWCsCcf4nwPU+7BGydzjge+k=",
    ),
    (
        "j",
        "Ta63tTWgHvsInSdQ7TAXTfJ2Z8Lzs4280B2RsnP5d8Q=",
        "X61aoZjC9sMP0iZaieElFosOH2CCZBO0W4EKIglQvSU=",
    ),
    (
        "k",
        "9twQNLCT3XnRuW8yjLHkif8AhoyaH9svH5KeW/MfnlE=",
        "M6LEYTQ6r1ZTYe0X9pjaH2zGuOpPHx5/Fq5bCruRwyc=",
    ),
    (
        "l",
        "WP4Ib+g3an+D4ndKKftgnN6X6gWNhMkxGU4rlnt5vvM=",
        "CCEpUpdplv7ioB7uOXMDN55+uZ3uydo7KMZgNyZiJDw=",
    ),
    (
        "m",
        "jJQaUmoK3HYWZgDUgwlVZ2mqxhZAUBGHTTynwgSAZOc=",
        "0iNGOoh+HR3hhFEs6i6urHqEDs1mbmaghpRAuWW9Plg=",
    ),
    (
        "n",
        "DYSQLMD2NrArhDRu15xD1WJihNW6q/fpl6k2JwaAzSs=",
        "uG3+QLIU71SGseNZJEXVFnfI3ZNLGCDU8G0dMROSx60=",
    ),
    (
        "o",
        "86VEHRHgyQDYlX0OcvSoLxSQxKCk2eHA87KTKOOJjtA=",
        "jnp0/jvVLGETjDZU3ckThZ1zCNvRbkPL55AHD6XjgHA=",
    ),
    (
        "p",
        "TPWvAn2alJqIHlBb18exTF62H/R9FZtYWjMdaQUB0T0=",
        "CXGcbYyZRw8qK9HP+Uz71/U/8TjowWFmnIX5psYUAxM=",
    ),
];

const EMPTY: &str = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";
/// The audit path of leaf 0 in the tree of ten leaves, also the consistency proof 1 -> 10.
const PATH_0_OF_10: [&str; 4] = [
    "V+s1YV1H807HFMrN9f10YIpejhAnJOgLJLKHwMJ7ajE=",
    "271owyVhSnPay056h6K3tK6XJLSJ5WKe6DFR/o8Or9c=",
    "lCw8dj8pYIlX2S0JVYnm5ftlQUw++a4m/B9J8H9eDcc=",
    "k6jBBWXmeTmR34Cyqu3RxQSzpyvl1xghtCDcSDvLXk0=",
];

fn vector_leaves() -> Vec<TreeHash> {
    HEADS.iter().map(|(_, leaf, _)| h(leaf)).collect()
}

#[test]
fn tree_heads_match_the_standard_vectors() {
    assert_eq!(empty_root(), h(EMPTY));
    let leaves = vector_leaves();
    let mut builder = TreeBuilder::new();
    for (i, (data, leaf, head)) in HEADS.iter().enumerate() {
        assert_eq!(leaf_hash(data.as_bytes()), h(leaf), "leaf hash of {data:?}");
        builder.push(h(leaf));
        let size = i as u64 + 1;
        assert_eq!(
            root(&mut Leaves(&leaves), size).unwrap(),
            h(head),
            "root of {size}"
        );
        assert_eq!(builder.root(), h(head), "streamed root of {size}");
    }
}

#[test]
fn inclusion_vectors_are_generated_and_verified() {
    let leaves = vector_leaves();
    let path_0_of_10: Vec<TreeHash> = PATH_0_OF_10.iter().map(|p| h(p)).collect();
    let cases: [(u64, u64, &str, Vec<TreeHash>); 4] = [
        (0, 1, HEADS[0].2, vec![]),
        (0, 2, HEADS[1].2, vec![h(HEADS[1].1)]),
        (1, 2, HEADS[1].2, vec![h(HEADS[0].1)]),
        (0, 10, HEADS[9].2, path_0_of_10),
    ];
    for (index, size, head, path) in cases {
        let made = inclusion_proof(&mut Leaves(&leaves), index, size).unwrap();
        assert_eq!(made, path, "path of {index} in {size}");
        verify_inclusion(&leaves[index as usize], index, size, &path, &h(head)).unwrap();
        // The mutated vectors: one bit of the leaf hash changed.
        let mut bad = leaves[index as usize];
        bad.0[1] ^= 0x04;
        assert!(matches!(
            verify_inclusion(&bad, index, size, &path, &h(head)),
            Err(ProofFailure::RootMismatch { .. })
        ));
    }
}

#[test]
fn consistency_vectors_are_generated_and_verified() {
    let leaves = vector_leaves();
    let empty = h(EMPTY);
    let a = h(HEADS[0].2);
    let ten = h(HEADS[9].2);
    let path: Vec<TreeHash> = PATH_0_OF_10.iter().map(|p| h(p)).collect();
    for (old, new, old_root, new_root, proof) in [
        (0, 0, empty, empty, vec![]),
        (0, 1, empty, a, vec![]),
        (1, 1, a, a, vec![]),
        (1, 10, a, ten, path.clone()),
    ] {
        assert_eq!(
            consistency_proof(&mut Leaves(&leaves), old, new).unwrap(),
            proof
        );
        verify_consistency(old, new, &old_root, &new_root, &proof)
            .unwrap_or_else(|e| panic!("{old} -> {new}: {e}"));
    }
    // The invalid vectors: each takes a valid case and changes the old size.
    let invalid: [(u64, u64, TreeHash, TreeHash, &[TreeHash]); 7] = [
        (1, 0, empty, empty, &[]),
        (1, 1, empty, a, &[]),
        (2, 1, empty, a, &[]),
        (0, 1, a, a, &[]),
        (2, 1, a, a, &[]),
        (0, 10, a, ten, &path),
        (11, 10, a, ten, &path),
    ];
    for (old, new, old_root, new_root, proof) in invalid {
        assert!(
            verify_consistency(old, new, &old_root, &new_root, proof).is_err(),
            "{old} -> {new} must not verify"
        );
    }
    for old in 2..=10 {
        assert!(
            verify_consistency(old, 10, &a, &ten, &path).is_err(),
            "{old} -> 10"
        );
    }
}

#[test]
fn requests_outside_the_tree_are_errors() {
    let leaves = vector_leaves();
    assert_eq!(
        inclusion_proof(&mut Leaves(&leaves), 3, 3),
        Err(TreeError::LeafOutOfRange { index: 3, size: 3 })
    );
    assert_eq!(
        consistency_proof(&mut Leaves(&leaves), 4, 3),
        Err(TreeError::Shrinking { old: 4, new: 3 })
    );
    assert!(root(&mut Leaves(&leaves[..3]), 4).is_err());
}

fn leaves_of(n: usize) -> Vec<TreeHash> {
    (0..n as u64).map(|i| leaf_hash(&i.to_le_bytes())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every generated proof of every shape verifies, and fails with any hash changed.
    #[test]
    fn proofs_of_every_shape_verify(size in 1u64..200, pick in any::<u64>(), flip in any::<u8>()) {
        let leaves = leaves_of(size as usize);
        let full = root(&mut Leaves(&leaves), size).unwrap();
        let index = pick % size;
        let path = inclusion_proof(&mut Leaves(&leaves), index, size).unwrap();
        prop_assert!(verify_inclusion(&leaves[index as usize], index, size, &path, &full).is_ok());
        if !path.is_empty() {
            let mut bad = path.clone();
            let at = flip as usize % bad.len();
            bad[at].0[0] ^= 1;
            prop_assert!(verify_inclusion(&leaves[index as usize], index, size, &bad, &full).is_err());
            prop_assert!(verify_inclusion(&leaves[index as usize], index, size, &path[1..], &full).is_err());
        }
        let old = pick % (size + 1);
        let old_root = root(&mut Leaves(&leaves), old).unwrap();
        let proof = consistency_proof(&mut Leaves(&leaves), old, size).unwrap();
        prop_assert!(verify_consistency(old, size, &old_root, &full, &proof).is_ok());
        if !proof.is_empty() {
            let mut bad = proof.clone();
            let at = flip as usize % bad.len();
            bad[at].0[31] ^= 0x80;
            prop_assert!(verify_consistency(old, size, &old_root, &full, &bad).is_err());
        }
    }

    /// The streaming builder reports exactly the complete subtrees the tree has.
    #[test]
    fn builder_reports_every_complete_subtree(size in 1usize..300) {
        let leaves = leaves_of(size);
        let mut builder = TreeBuilder::new();
        let mut closed = Vec::new();
        for leaf in &leaves {
            builder.push_reporting(*leaf, |level, index, hash| closed.push((level, index, *hash)));
        }
        prop_assert_eq!(builder.root(), root(&mut Leaves(&leaves), size as u64).unwrap());
        let expected: usize = (0..64).map(|level| size >> level).sum();
        prop_assert_eq!(closed.len(), expected);
        for (level, index, hash) in closed {
            prop_assert_eq!(Leaves(&leaves).subtree(level, index).unwrap(), hash);
        }
    }
}
