//! The routes `pods/{name}/exec`, `pods/{name}/attach` and `pods/{name}/portforward`.
