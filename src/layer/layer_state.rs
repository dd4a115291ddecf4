//! [`LayerState`]: what a layer, its clones, its services and its handles share (the settings
//! as built, and the cell of the decider in force that a handle swaps).

use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;

use super::decide::Decider;
use super::layer_settings::LayerSettings;

/// What a layer, its clones, its services and its handles share.
pub(super) struct LayerState {
    /// The settings as built.
    base: Arc<LayerSettings>,
    /// The decider in force, made from `base` at first use (the first service or handle, so a
    /// metrics recorder installed after building is still the one its meters use) and swapped
    /// by [`Handle::replace_rules`](super::Handle::replace_rules) for every service at once.
    cell: OnceLock<Arc<ArcSwap<Decider>>>,
}

impl LayerState {
    pub(super) fn new(base: LayerSettings) -> Self {
        LayerState {
            base: Arc::new(base),
            cell: OnceLock::new(),
        }
    }

    /// The cell of the decider in force, derived once.
    pub(super) fn cell(&self) -> &Arc<ArcSwap<Decider>> {
        self.cell
            .get_or_init(|| Arc::new(ArcSwap::from_pointee(Decider::new(Arc::clone(&self.base)))))
    }

    /// The decider in force now.
    pub(super) fn decider(&self) -> Arc<Decider> {
        self.cell().load_full()
    }

    /// The settings in force now, without deriving a decider for them.
    pub(super) fn config(&self) -> Arc<LayerSettings> {
        match self.cell.get() {
            Some(cell) => Arc::clone(&cell.load().config),
            None => Arc::clone(&self.base),
        }
    }
}
