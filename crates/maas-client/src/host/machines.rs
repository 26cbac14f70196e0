//! [`Machines`]: the narrow handle through which host operations read a MAAS machine: the rate
//! limited MAAS client and the machine cache, nothing else of the gateway. Every view MAAS
//! returns goes into the cache, so the observer and the other hosts see it too.

use std::sync::Arc;

use maas_api_client::{MaasError, Machine};

use crate::cache::MachineCache;
use crate::context::Gateway;
use crate::error::{Error, Result};
use crate::maas::{Maas, Timed};

/// MAAS and the machine cache.
#[derive(Clone, Copy)]
pub(super) struct Machines<'a> {
    pub(super) maas: &'a Maas,
    pub(super) cache: &'a MachineCache,
}

impl<'a> Machines<'a> {
    pub(super) fn of(gw: &'a Gateway) -> Self {
        Self {
            maas: &gw.maas,
            cache: &gw.cache,
        }
    }

    /// Records a machine MAAS returned and hands back the view.
    pub(super) fn seen(self, answer: Timed<Machine>) -> Arc<Machine> {
        self.cache.observe(answer.value.clone(), answer.sent);
        Arc::new(answer.value)
    }

    /// A direct read of one machine: `None` only for a 404 (gone from MAAS); any other failure
    /// is an error, never "gone".
    pub(super) async fn read(self, system_id: &str) -> Result<Option<Arc<Machine>>> {
        match self.maas.get_machine(system_id).await {
            Ok(answer) => Ok(Some(self.seen(answer))),
            Err(MaasError::NotFound { .. }) => {
                self.cache.forget_machine(system_id);
                Ok(None)
            }
            Err(e) => Err(Error::maas("get machine")(e)),
        }
    }
}
