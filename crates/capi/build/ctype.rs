//! Translation of the C declarations found in mpi.h into Rust FFI types.
//!
//! The vocabulary is small: builtin scalars, the header's typedefs, `struct`/`enum` tags, any
//! number of `*`, array suffixes, `const`, and function-pointer parameters.  Rules:
//!   - `const T *p` becomes `*const T`; every other pointer level is `*mut`;
//!   - a parameter `T p[]` is a pointer (`T p[][3]` a pointer to `[T; 3]`), an object `T o[1]` an
//!     array;
//!   - a pointer to a function typedef, or a parameter of function type, is `Option<F>` where F is
//!     the Rust `unsafe extern "C" fn` alias of the typedef: null stays representable.

use crate::header::Param;

/// What a name refers to, for the translator.
pub trait Types {
    fn is_function_type(&self, name: &str) -> bool;
    fn is_known_type(&self, name: &str) -> bool;
}

fn scalar(words: &[&str]) -> Option<&'static str> {
    Some(match words.join(" ").as_str() {
        "void" => "c_void",
        "int" | "signed" | "signed int" => "c_int",
        "unsigned" | "unsigned int" => "c_uint",
        "long" | "long int" => "c_long",
        "unsigned long" => "c_ulong",
        "long long" => "c_longlong",
        "short" => "c_short",
        "char" => "c_char",
        "signed char" => "c_schar",
        "unsigned char" => "c_uchar",
        "double" => "f64",
        "float" => "f32",
        "_Bool" => "bool",
        _ => return None,
    })
}

/// Rust type for a C base type written as words (`const` already removed).
fn base_type(words: &[&str], types: &dyn Types) -> Result<String, String> {
    if let Some(s) = scalar(words) {
        return Ok(s.to_string());
    }
    match words {
        ["enum", _] => Ok("c_int".to_string()),
        ["struct", tag] => Ok(tag.to_string()),
        [name] if types.is_known_type(name) => Ok(name.to_string()),
        _ => Err(format!("no Rust type for C type '{}'", words.join(" "))),
    }
}

/// The Rust type of a function signature: `unsafe extern "C" fn(A, B, ...) -> R`.
pub fn fn_type(
    ret: &str,
    params: &[Param],
    variadic: bool,
    types: &dyn Types,
) -> Result<String, String> {
    let mut args = Vec::new();
    for p in params {
        args.push(param_type(&p.decl, p.name.as_deref(), types)?);
    }
    if variadic {
        args.push("...".to_string());
    }
    let ret = return_type(ret, types)?;
    Ok(format!(
        "unsafe extern \"C\" fn({}){}",
        args.join(", "),
        ret
    ))
}

/// ` -> R`, or nothing for void.
pub fn return_type(ret: &str, types: &dyn Types) -> Result<String, String> {
    if ret == "void" {
        return Ok(String::new());
    }
    Ok(format!(" -> {}", decl_type(ret, None, types, true)?))
}

/// A parameter (arrays decay to pointers).
pub fn param_type(decl: &str, name: Option<&str>, types: &dyn Types) -> Result<String, String> {
    decl_type(decl, name, types, true)
}

/// An object or structure field (arrays stay arrays).
pub fn object_type(decl: &str, name: Option<&str>, types: &dyn Types) -> Result<String, String> {
    decl_type(decl, name, types, false)
}

fn decl_type(
    decl: &str,
    name: Option<&str>,
    types: &dyn Types,
    decay: bool,
) -> Result<String, String> {
    // Function pointer: `Ret (*name)(params)` or `Ret (**name)(params)`
    if let Some(open) = decl.find("(*") {
        let ret = decl[..open].trim();
        let after = &decl[open + 1..];
        let close = after
            .find(')')
            .ok_or_else(|| format!("bad declarator '{decl}'"))?;
        let stars = after[..close].matches('*').count();
        let plist = after[close + 1..].trim();
        let inner = plist
            .strip_prefix('(')
            .and_then(|p| p.strip_suffix(')'))
            .ok_or_else(|| format!("bad parameter list in '{decl}'"))?;
        let mut params = Vec::new();
        let mut variadic = false;
        if inner.trim() != "void" {
            for item in inner.split(',') {
                let item = item.trim();
                if item == "..." {
                    variadic = true;
                } else {
                    params.push(Param {
                        decl: item.to_string(),
                        name: None,
                    });
                }
            }
        }
        // Inner parameter names are irrelevant to the type; drop the last word if it is a name.
        for p in &mut params {
            let words: Vec<&str> = p.decl.split_whitespace().collect();
            if words.len() > 1 {
                let last = words[words.len() - 1].trim_start_matches('*');
                if scalar(&[last]).is_none() && !types.is_known_type(last) {
                    p.name = Some(last.to_string());
                }
            }
        }
        let mut ty = format!("Option<{}>", fn_type(ret, &params, variadic, types)?);
        for _ in 1..stars {
            ty = format!("*mut {ty}");
        }
        return Ok(ty);
    }

    // Split off array suffixes.
    let (head, dims) = match decl.find('[') {
        Some(i) => (&decl[..i], &decl[i..]),
        None => (decl, ""),
    };
    let mut dim_list = Vec::new();
    for part in dims.split('[').skip(1) {
        let d = part
            .trim_end()
            .strip_suffix(']')
            .ok_or_else(|| format!("bad array in '{decl}'"))?;
        dim_list.push(d.trim().to_string());
    }

    // Words and stars; the declared name (if any) is dropped.
    let spaced = head.replace('*', " * ");
    let mut tokens: Vec<&str> = spaced.split_whitespace().collect();
    if let Some(n) = name {
        if tokens.last() == Some(&n) {
            tokens.pop();
        }
    }
    let mut base_const = false;
    let mut words = Vec::new();
    let mut stars = 0usize;
    for t in &tokens {
        match *t {
            "*" => stars += 1,
            "const" if stars == 0 => base_const = true,
            "const" => {} // `T *const p`: constness of the pointer itself is not a Rust type
            w if stars == 0 => words.push(w),
            w => return Err(format!("unexpected '{w}' after '*' in '{decl}'")),
        }
    }

    let base_name = words.join(" ");
    let mut pointer_levels = stars;
    let mut ty;
    if words.len() == 1 && types.is_function_type(&base_name) {
        // A function type decays to a pointer; the pointer level it needs is the Option.
        ty = format!("Option<{base_name}>");
        pointer_levels = pointer_levels.saturating_sub(1);
    } else {
        ty = base_type(&words, types)?;
    }

    // Inner array dimensions become array types; the outermost one decays for parameters.
    let (decayed, inner_dims): (bool, &[String]) = match dim_list.split_first() {
        Some((_, rest)) if decay => (true, rest),
        _ => (false, &dim_list[..]),
    };
    for d in inner_dims.iter().rev() {
        if d.is_empty() {
            return Err(format!("array without size in '{decl}'"));
        }
        ty = format!("[{ty}; {d}]");
    }
    if decayed {
        pointer_levels += 1;
    }
    for level in 0..pointer_levels {
        let q = if level == 0 && base_const {
            "*const"
        } else {
            "*mut"
        };
        ty = format!("{q} {ty}");
    }
    if ty == "c_void" {
        return Err(format!("bare void in '{decl}'"));
    }
    Ok(ty)
}
