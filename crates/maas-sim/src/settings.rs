//! The region's configuration settings that change what an API call does, as MAAS keeps them
//! (`Config` in MAAS; read and written with `GET/POST /maas/?op=get_config|set_config`).

use serde::{Deserialize, Serialize};

/// The settings the simulator models, with MAAS's defaults (all off).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
// Every setting defaults (as MAAS's do), so a state file from before one was added still loads.
#[serde(default)]
pub(crate) struct Settings {
    /// "Erase nodes' disks prior to releasing": every release erases, whatever it asks for.
    pub(crate) enable_disk_erasing_on_release: bool,
    /// An erase that does not say `secure_erase` uses this.
    pub(crate) disk_erase_with_secure_erase: bool,
    /// An erase that does not say `quick_erase` uses this.
    pub(crate) disk_erase_with_quick_erase: bool,
}

/// Names `get_config`/`set_config` accept here. Real MAAS has many more; the others are refused
/// as unknown rather than silently ignored, so a test cannot rely on one the simulator lacks.
pub(crate) const NAMES: [&str; 3] = [
    "enable_disk_erasing_on_release",
    "disk_erase_with_secure_erase",
    "disk_erase_with_quick_erase",
];

impl Settings {
    /// The value of setting `name`, if it is one of [`NAMES`].
    pub(crate) fn get(self, name: &str) -> Option<bool> {
        match name {
            "enable_disk_erasing_on_release" => Some(self.enable_disk_erasing_on_release),
            "disk_erase_with_secure_erase" => Some(self.disk_erase_with_secure_erase),
            "disk_erase_with_quick_erase" => Some(self.disk_erase_with_quick_erase),
            _ => None,
        }
    }

    /// Sets `name`; `false` when it is not one of [`NAMES`].
    pub(crate) fn set(&mut self, name: &str, value: bool) -> bool {
        let slot = match name {
            "enable_disk_erasing_on_release" => &mut self.enable_disk_erasing_on_release,
            "disk_erase_with_secure_erase" => &mut self.disk_erase_with_secure_erase,
            "disk_erase_with_quick_erase" => &mut self.disk_erase_with_quick_erase,
            _ => return false,
        };
        *slot = value;
        true
    }

    /// The erase a release performs, as MAAS decides it (`Machine.release_or_erase`): it erases
    /// when asked or when `enable_disk_erasing_on_release` is on, and an erase without an
    /// explicit `secure_erase`/`quick_erase` takes the configured ones.
    pub(crate) fn release_erase(
        self,
        erase: bool,
        secure_erase: Option<bool>,
        quick_erase: Option<bool>,
    ) -> (bool, bool, bool) {
        let erase = erase || self.enable_disk_erasing_on_release;
        if !erase {
            return (
                false,
                secure_erase.unwrap_or(false),
                quick_erase.unwrap_or(false),
            );
        }
        (
            true,
            secure_erase.unwrap_or(self.disk_erase_with_secure_erase),
            quick_erase.unwrap_or(self.disk_erase_with_quick_erase),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_erases_when_asked_or_when_maas_enforces_it() {
        let off = Settings::default();
        assert_eq!(off.release_erase(false, None, None), (false, false, false));
        assert_eq!(off.release_erase(true, None, None), (true, false, false));
        let enforced = Settings {
            enable_disk_erasing_on_release: true,
            disk_erase_with_secure_erase: true,
            disk_erase_with_quick_erase: false,
        };
        assert_eq!(
            enforced.release_erase(false, None, None),
            (true, true, false)
        );
        assert_eq!(
            enforced.release_erase(false, Some(false), Some(true)),
            (true, false, true),
            "explicit flags win over the configured ones"
        );
    }

    #[test]
    fn only_modelled_settings_are_read_or_written() {
        let mut s = Settings::default();
        assert!(s.set("enable_disk_erasing_on_release", true));
        assert_eq!(s.get("enable_disk_erasing_on_release"), Some(true));
        assert!(!s.set("maas_name", true));
        assert_eq!(s.get("maas_name"), None);
        for name in NAMES {
            assert!(s.get(name).is_some(), "{name}");
        }
    }
}
