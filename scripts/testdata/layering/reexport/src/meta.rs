//! Defines `Meta`; names `user`.
pub struct Meta;

pub fn owner() -> crate::user::User {
    crate::user::User
}
