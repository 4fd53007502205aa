//! Names `resource::Meta`.
pub struct User;

pub fn meta() -> crate::resource::Meta {
    crate::resource::Meta
}
