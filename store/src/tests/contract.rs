//! The contract every backend keeps, run on the embedded log.

use crate::{EmbeddedStore, StoreConfig};

async fn open() -> Option<(EmbeddedStore, tempfile::TempDir)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(dir.path(), StoreConfig::default())
        .await
        .expect("store opens");
    Some((store, dir))
}

crate::event_store_contract!(open);
