//! Test items and test files name `a`; none of them counts.
pub struct B;

#[cfg(test)]
use crate::a::a;

#[cfg(test)]
pub(crate) fn helper() {
    let _ = crate::a::a();
}

#[cfg(test)]
impl B {
    fn new_via_a() -> B {
        super::a::a()
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "b_more_tests.rs"]
mod more;

pub fn b() -> B {
    B
}
