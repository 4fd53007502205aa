//! Names its parent through `super::{self, ..}`.
use super::{self as outer, Config};

pub fn serve() {
    let _: Option<Config> = None;
    let _ = outer::run;
}
