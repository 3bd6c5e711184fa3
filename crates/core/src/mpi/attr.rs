//! Attribute caching (MPI-4.0 section 7.7): keyvals and the attributes they key on
//! communicators, datatypes and windows.
//!
//! The engine only stores: keyvals (their callbacks as opaque addresses, the extra state) and,
//! per object, the attributes in the order they were set. Callbacks are user code that may call
//! MPI, so the engine never calls them: the C layer asks what to call (`copy_list`,
//! `delete_order`, ...), calls it after leaving the engine, and reports back (`store`,
//! `remove`). Ordering rules kept here:
//!
//! - copy callbacks run in the order the attributes were set;
//! - delete callbacks run in the reverse order (MPI-4.0 11.2.4 requires it for MPI_COMM_SELF
//!   at MPI_Finalize; we use it for every object);
//! - a keyval freed while attributes still use it stays alive (its callbacks still run, and
//!   those attributes can still be read, replaced and deleted with it) until the last of them
//!   is deleted.

use std::collections::HashMap;

use crate::err;
use crate::error::Result;

/// The kind of object an attribute is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjKind {
    Comm,
    Type,
    Win,
}

impl ObjKind {
    pub fn name(self) -> &'static str {
        match self {
            ObjKind::Comm => "communicator",
            ObjKind::Type => "datatype",
            ObjKind::Win => "window",
        }
    }
}

/// A key created by MPI_{Comm,Type,Win}_create_keyval (or MPI_Keyval_create).
#[derive(Debug, Clone)]
pub struct Keyval {
    pub kind: ObjKind,
    /// Copy callback address; 0 is the "null copy" function (never copied).
    pub copy: usize,
    /// Delete callback address; 0 is the "null delete" function.
    pub delete: usize,
    pub extra: usize,
    /// MPI_*_free_keyval was called: no new attributes, but existing ones keep it alive.
    pub freed: bool,
    /// Attributes currently stored with this key.
    pub uses: usize,
}

/// What the C layer needs to call a callback of an attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttrCall {
    pub keyval: u32,
    /// The callback (copy or delete, depending on the question asked); 0: none.
    pub func: usize,
    pub extra: usize,
    pub value: usize,
}

/// Keyvals and attributes of every object of the process.
#[derive(Debug, Default)]
pub struct AttrStore {
    keyvals: Vec<Option<Keyval>>,
    /// Per object, (keyval, value) in the order the attributes were set.
    attrs: HashMap<(ObjKind, u32), Vec<(u32, usize)>>,
}

impl AttrStore {
    pub fn create_keyval(
        &mut self,
        kind: ObjKind,
        copy: usize,
        delete: usize,
        extra: usize,
    ) -> u32 {
        let k = Keyval {
            kind,
            copy,
            delete,
            extra,
            freed: false,
            uses: 0,
        };
        match self.keyvals.iter().position(|k| k.is_none()) {
            Some(i) => {
                self.keyvals[i] = Some(k);
                i as u32
            }
            None => {
                self.keyvals.push(Some(k));
                (self.keyvals.len() - 1) as u32
            }
        }
    }

    /// The live (not freed by the user) keyval `id` of kind `kind`.
    pub fn keyval(&self, id: u32, kind: ObjKind) -> Result<&Keyval> {
        match self.keyvals.get(id as usize) {
            Some(Some(k)) if !k.freed && k.kind == kind => Ok(k),
            Some(Some(k)) if !k.freed => err!(
                Keyval,
                "the keyval was created for {}s, not for {}s",
                k.kind.name(),
                kind.name()
            ),
            _ => err!(
                Keyval,
                "invalid keyval (MPI_KEYVAL_INVALID or already freed)"
            ),
        }
    }

    /// Keyval `id` of kind `kind` for a call on the attributes already set: a keyval the
    /// user freed is still accepted while attributes use it (MPI-4.0 7.7.2: the free takes
    /// effect once the last of them is deleted; MPICH counts the references the same way),
    /// so such an attribute can still be read, replaced and deleted.
    fn keyval_in_use(&self, id: u32, kind: ObjKind) -> Result<&Keyval> {
        match self.keyvals.get(id as usize) {
            Some(Some(k)) if k.freed && k.uses > 0 && k.kind == kind => Ok(k),
            _ => self.keyval(id, kind),
        }
    }

    /// MPI_*_free_keyval. Freeing again a keyval that attributes still keep alive does
    /// nothing (as MPICH: a delete callback commonly frees its keyval, whichever attribute of
    /// it goes first).
    pub fn free_keyval(&mut self, id: u32, kind: ObjKind) -> Result<()> {
        if let Some(Some(k)) = self.keyvals.get(id as usize) {
            if k.freed && k.kind == kind {
                return Ok(());
            }
        }
        self.keyval(id, kind)?;
        let k = self.keyvals[id as usize].as_mut().expect("checked");
        k.freed = true;
        if k.uses == 0 {
            self.keyvals[id as usize] = None;
        }
        Ok(())
    }

    pub fn get(&self, kind: ObjKind, obj: u32, keyval: u32) -> Result<Option<usize>> {
        self.keyval_in_use(keyval, kind)?;
        Ok(self
            .attrs
            .get(&(kind, obj))
            .and_then(|v| v.iter().find(|(k, _)| *k == keyval))
            .map(|(_, v)| *v))
    }

    /// Before MPI_*_set_attr: the delete callback to run on the value it replaces, if any.
    /// A keyval freed by the user (alive while attributes use it) may still replace the
    /// value of an attribute set with it, but not make a new one.
    pub fn before_set(&self, kind: ObjKind, obj: u32, keyval: u32) -> Result<Option<AttrCall>> {
        let k = match self.current(kind, obj, keyval) {
            Some(_) => self.keyval_in_use(keyval, kind)?,
            None => self.keyval(keyval, kind)?,
        };
        Ok(self.current(kind, obj, keyval).map(|value| AttrCall {
            keyval,
            func: k.delete,
            extra: k.extra,
            value,
        }))
    }

    fn current(&self, kind: ObjKind, obj: u32, keyval: u32) -> Option<usize> {
        self.attrs
            .get(&(kind, obj))
            .and_then(|v| v.iter().find(|(k, _)| *k == keyval))
            .map(|(_, v)| *v)
    }

    /// Store `value` (replacing an existing value in place; a new attribute goes last).
    /// The keyval may have been freed meanwhile only when replacing (a copy on dup).
    pub fn store(&mut self, kind: ObjKind, obj: u32, keyval: u32, value: usize) -> Result<()> {
        let Some(Some(k)) = self.keyvals.get_mut(keyval as usize) else {
            return err!(Keyval, "invalid keyval (already freed)");
        };
        if k.kind != kind {
            return err!(Keyval, "the keyval was created for {}s", k.kind.name());
        }
        let list = self.attrs.entry((kind, obj)).or_default();
        match list.iter_mut().find(|(kv, _)| *kv == keyval) {
            Some(e) => e.1 = value,
            None => {
                list.push((keyval, value));
                k.uses += 1;
            }
        }
        Ok(())
    }

    /// Before MPI_*_delete_attr: the delete callback to run. Errors when the attribute is
    /// not set.
    pub fn before_delete(&self, kind: ObjKind, obj: u32, keyval: u32) -> Result<AttrCall> {
        let k = self.keyval_in_use(keyval, kind)?;
        match self.current(kind, obj, keyval) {
            Some(value) => Ok(AttrCall {
                keyval,
                func: k.delete,
                extra: k.extra,
                value,
            }),
            None => err!(
                Keyval,
                "no attribute is set for this keyval on the {}",
                kind.name()
            ),
        }
    }

    /// Remove one attribute (its delete callback succeeded); releases a freed keyval when
    /// this was its last use.
    pub fn remove(&mut self, kind: ObjKind, obj: u32, keyval: u32) {
        let Some(list) = self.attrs.get_mut(&(kind, obj)) else {
            return;
        };
        let Some(i) = list.iter().position(|(k, _)| *k == keyval) else {
            return;
        };
        list.remove(i);
        if list.is_empty() {
            self.attrs.remove(&(kind, obj));
        }
        if let Some(Some(k)) = self.keyvals.get_mut(keyval as usize) {
            k.uses -= 1;
            if k.uses == 0 && k.freed {
                self.keyvals[keyval as usize] = None;
            }
        }
    }

    /// Attributes to offer to copy callbacks when the object is duplicated, in the order they
    /// were set (`func` is the copy callback; 0 means not copied).
    pub fn copy_list(&self, kind: ObjKind, obj: u32) -> Vec<AttrCall> {
        self.list(kind, obj, |k| k.copy)
    }

    /// Attributes to delete when the object is freed, in reverse order of setting (`func` is
    /// the delete callback).
    pub fn delete_order(&self, kind: ObjKind, obj: u32) -> Vec<AttrCall> {
        let mut v = self.list(kind, obj, |k| k.delete);
        v.reverse();
        v
    }

    fn list(&self, kind: ObjKind, obj: u32, f: impl Fn(&Keyval) -> usize) -> Vec<AttrCall> {
        let Some(list) = self.attrs.get(&(kind, obj)) else {
            return Vec::new();
        };
        list.iter()
            .map(|&(keyval, value)| {
                let k = self.keyvals[keyval as usize]
                    .as_ref()
                    .expect("a keyval in use is alive");
                AttrCall {
                    keyval,
                    func: f(k),
                    extra: k.extra,
                    value,
                }
            })
            .collect()
    }

    /// Does the object carry attributes?
    pub fn has_any(&self, kind: ObjKind, obj: u32) -> bool {
        self.attrs.contains_key(&(kind, obj))
    }

    /// Keyval `id` even if freed by the user (a callback of an attribute still using it).
    pub fn keyval_any(&self, id: u32) -> Option<&Keyval> {
        self.keyvals.get(id as usize)?.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_delete_and_order() {
        let mut s = AttrStore::default();
        let k1 = s.create_keyval(ObjKind::Comm, 11, 12, 13);
        let k2 = s.create_keyval(ObjKind::Comm, 0, 22, 23);
        let kt = s.create_keyval(ObjKind::Type, 0, 0, 0);
        assert_eq!(s.get(ObjKind::Comm, 5, k1).unwrap(), None);
        assert!(s.before_set(ObjKind::Comm, 5, k2).unwrap().is_none());
        s.store(ObjKind::Comm, 5, k2, 200).unwrap();
        s.store(ObjKind::Comm, 5, k1, 100).unwrap();
        assert_eq!(s.get(ObjKind::Comm, 5, k1).unwrap(), Some(100));
        // Wrong kind of keyval.
        assert!(s.get(ObjKind::Comm, 5, kt).is_err());
        assert!(s.store(ObjKind::Comm, 5, kt, 1).is_err());
        // Replacing asks to delete the old value and keeps the position.
        let old = s.before_set(ObjKind::Comm, 5, k2).unwrap().unwrap();
        assert_eq!((old.func, old.value), (22, 200));
        s.store(ObjKind::Comm, 5, k2, 201).unwrap();
        let copies = s.copy_list(ObjKind::Comm, 5);
        assert_eq!(
            copies
                .iter()
                .map(|c| (c.keyval, c.func, c.value))
                .collect::<Vec<_>>(),
            vec![(k2, 0, 201), (k1, 11, 100)]
        );
        let dels = s.delete_order(ObjKind::Comm, 5);
        assert_eq!(
            dels.iter().map(|c| c.keyval).collect::<Vec<_>>(),
            vec![k1, k2]
        );
        assert!(s.before_delete(ObjKind::Comm, 6, k1).is_err());
        s.remove(ObjKind::Comm, 5, k1);
        assert_eq!(s.get(ObjKind::Comm, 5, k1).unwrap(), None);
    }

    #[test]
    fn freed_keyval_lives_while_used() {
        let mut s = AttrStore::default();
        let k = s.create_keyval(ObjKind::Comm, 0, 7, 0);
        s.store(ObjKind::Comm, 1, k, 10).unwrap();
        s.free_keyval(k, ObjKind::Comm).unwrap();
        assert!(s.keyval(k, ObjKind::Comm).is_err(), "no new use after free");
        assert!(
            s.free_keyval(k, ObjKind::Comm).is_ok(),
            "again, while in use"
        );
        assert!(s.free_keyval(k, ObjKind::Type).is_err(), "wrong kind");
        assert_eq!(s.delete_order(ObjKind::Comm, 1)[0].func, 7);
        // The attributes using it can still be read, replaced and deleted; the kind is
        // still checked, and no new attribute takes it.
        assert_eq!(s.get(ObjKind::Comm, 1, k).unwrap(), Some(10));
        assert_eq!(s.get(ObjKind::Comm, 2, k).unwrap(), None);
        assert!(s.get(ObjKind::Type, 1, k).is_err());
        assert_eq!(
            s.before_set(ObjKind::Comm, 1, k).unwrap().unwrap().value,
            10
        );
        assert!(s.before_set(ObjKind::Comm, 2, k).is_err());
        assert_eq!(s.before_delete(ObjKind::Comm, 1, k).unwrap().func, 7);
        s.remove(ObjKind::Comm, 1, k);
        assert!(
            s.get(ObjKind::Comm, 1, k).is_err(),
            "gone with its last use"
        );
        assert!(s.before_delete(ObjKind::Comm, 1, k).is_err());
        assert!(s.keyval_any(k).is_none());
        assert!(
            s.free_keyval(k, ObjKind::Comm).is_err(),
            "gone: a double free"
        );
        // The slot is reused.
        assert_eq!(s.create_keyval(ObjKind::Type, 0, 0, 0), k);
    }
}
