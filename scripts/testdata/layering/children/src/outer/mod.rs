//! Calls its child `inner` by a bare path.
mod inner;

pub struct Config;

pub fn run() {
    inner::serve();
}
