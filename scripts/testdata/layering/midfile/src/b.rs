//! Production code after its test module names `a`.
pub struct B;

#[cfg(test)]
mod tests {
    // A closing brace in a comment: }
    /* and in a /* nested */ block comment: } */
    const S: &str = "} still in the string \" }";
    const R: &str = r#"} a raw string "} "#;
    const C: char = '}';
    const D: u8 = b'{';
    fn f<'a>(x: &'a str) -> &'a str {
        let _ = ('{', "{");
        x
    }
}

pub fn make() -> crate::a::A {
    crate::a::A(B)
}
