//! MPI handles (MPICH ABI) <-> engine ids.
//!
//! Predefined handles have the values of MPICH's header. Handles of objects the engine creates
//! use the "direct" kind bits of MPICH's layout (kind in bits 30-31, object type in bits 26-29)
//! with the engine id in the low 26 bits, so they never collide with a predefined value and a
//! handle of one object type is never mistaken for another's.

use protean_core::ids::{CommId, DtypeId, ReqId};
use std::ffi::c_int;

use crate::abi::*;
use protean_core::mpi::attr::ObjKind;
use protean_core::mpi::comm::{COMM_SELF, COMM_WORLD, ERRH_ABORT, ERRH_FATAL, ERRH_RETURN};

const ID_MASK: u32 = (1 << 26) - 1;
const KIND_TYPE_MASK: u32 = !ID_MASK;

const COMM_DIRECT: u32 = 0x8400_0000;
/// MPICH's pair types occupy 0x8c000000.. so created datatypes use the "indirect" kind.
const DTYPE_CREATED: u32 = 0xcc00_0000;
const REQUEST_DIRECT: u32 = 0xac00_0000;
const MESSAGE_CREATED: u32 = 0xec00_0000;
const ERRH_DIRECT: u32 = 0x9400_0000;
const GROUP_DIRECT: u32 = 0x8800_0000;
/// Created keyvals: MPICH's keyval kind bits (0xa4000000) with the object kind in bits 22-25
/// (1 communicator, 2 datatype, 3 window) and the engine id below.
const KEYVAL_DIRECT: u32 = 0xa400_0000;
const KEYVAL_ID_MASK: u32 = (1 << 22) - 1;
/// MPICH's predefined operations are builtin-kind handles 0x58000001..=0x5800000e; created
/// operations use the direct kind of the same object type.
const OP_BUILTIN: u32 = 0x5800_0000;
const OP_DIRECT: u32 = 0x9800_0000;

#[inline(always)]
fn split(h: i32) -> (u32, u32) {
    let h = h as u32;
    (h & KIND_TYPE_MASK, h & ID_MASK)
}

/// Communicator handle -> engine id (None for MPI_COMM_NULL and garbage).
#[inline(always)]
pub fn comm_id(h: MPI_Comm) -> Option<CommId> {
    match h {
        MPI_COMM_WORLD => Some(COMM_WORLD),
        MPI_COMM_SELF => Some(COMM_SELF),
        _ => match split(h) {
            (COMM_DIRECT, id) if id > COMM_SELF.get() => Some(CommId::new(id)),
            _ => None,
        },
    }
}

pub fn comm_handle(id: CommId) -> MPI_Comm {
    match id {
        COMM_WORLD => MPI_COMM_WORLD,
        COMM_SELF => MPI_COMM_SELF,
        _ => (COMM_DIRECT | id.get()) as i32,
    }
}

/// Predefined datatype handles in the engine's predefined order
/// (`protean_core::mpi::datatype::PREDEFINED_NAMES`; a unit test checks the two agree).
pub const PREDEFINED_DTYPES: &[(MPI_Datatype, &str)] = &[
    (MPI_CHAR, "MPI_CHAR"),
    (MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR"),
    (MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR"),
    (MPI_BYTE, "MPI_BYTE"),
    (MPI_WCHAR, "MPI_WCHAR"),
    (MPI_SHORT, "MPI_SHORT"),
    (MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT"),
    (MPI_INT, "MPI_INT"),
    (MPI_UNSIGNED, "MPI_UNSIGNED"),
    (MPI_LONG, "MPI_LONG"),
    (MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG"),
    (MPI_FLOAT, "MPI_FLOAT"),
    (MPI_DOUBLE, "MPI_DOUBLE"),
    (MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE"),
    (MPI_LONG_LONG_INT, "MPI_LONG_LONG_INT"),
    (MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG"),
    (MPI_PACKED, "MPI_PACKED"),
    (MPI_FLOAT_INT, "MPI_FLOAT_INT"),
    (MPI_DOUBLE_INT, "MPI_DOUBLE_INT"),
    (MPI_LONG_INT, "MPI_LONG_INT"),
    (MPI_SHORT_INT, "MPI_SHORT_INT"),
    (MPI_2INT, "MPI_2INT"),
    (MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT"),
    (MPI_COMPLEX, "MPI_COMPLEX"),
    (MPI_DOUBLE_COMPLEX, "MPI_DOUBLE_COMPLEX"),
    (MPI_LOGICAL, "MPI_LOGICAL"),
    (MPI_REAL, "MPI_REAL"),
    (MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION"),
    (MPI_INTEGER, "MPI_INTEGER"),
    (MPI_2INTEGER, "MPI_2INTEGER"),
    (MPI_2REAL, "MPI_2REAL"),
    (MPI_2DOUBLE_PRECISION, "MPI_2DOUBLE_PRECISION"),
    (MPI_CHARACTER, "MPI_CHARACTER"),
    (MPI_REAL4, "MPI_REAL4"),
    (MPI_REAL8, "MPI_REAL8"),
    (MPI_REAL16, "MPI_REAL16"),
    (MPI_COMPLEX8, "MPI_COMPLEX8"),
    (MPI_COMPLEX16, "MPI_COMPLEX16"),
    (MPI_COMPLEX32, "MPI_COMPLEX32"),
    (MPI_INTEGER1, "MPI_INTEGER1"),
    (MPI_INTEGER2, "MPI_INTEGER2"),
    (MPI_INTEGER4, "MPI_INTEGER4"),
    (MPI_INTEGER8, "MPI_INTEGER8"),
    (MPI_INT8_T, "MPI_INT8_T"),
    (MPI_INT16_T, "MPI_INT16_T"),
    (MPI_INT32_T, "MPI_INT32_T"),
    (MPI_INT64_T, "MPI_INT64_T"),
    (MPI_UINT8_T, "MPI_UINT8_T"),
    (MPI_UINT16_T, "MPI_UINT16_T"),
    (MPI_UINT32_T, "MPI_UINT32_T"),
    (MPI_UINT64_T, "MPI_UINT64_T"),
    (MPI_C_BOOL, "MPI_C_BOOL"),
    (MPI_C_FLOAT_COMPLEX, "MPI_C_COMPLEX"),
    (MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX"),
    (MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX"),
    (MPI_AINT, "MPI_AINT"),
    (MPI_OFFSET, "MPI_OFFSET"),
    (MPI_COUNT, "MPI_COUNT"),
    (MPI_CXX_BOOL, "MPI_CXX_BOOL"),
    (MPI_CXX_FLOAT_COMPLEX, "MPI_CXX_FLOAT_COMPLEX"),
    (MPI_CXX_DOUBLE_COMPLEX, "MPI_CXX_DOUBLE_COMPLEX"),
    (MPI_CXX_LONG_DOUBLE_COMPLEX, "MPI_CXX_LONG_DOUBLE_COMPLEX"),
    (MPIX_C_FLOAT16, "MPIX_C_FLOAT16"),
    (MPI_LB, "MPI_LB"),
    (MPI_UB, "MPI_UB"),
];

/// Datatype handle -> engine id.
#[inline(always)]
pub fn dtype_id(h: MPI_Datatype) -> Option<DtypeId> {
    // The most common types first: one compare each.
    match h {
        MPI_BYTE => return Some(DtypeId::new(3)),
        MPI_INT => return Some(DtypeId::new(7)),
        MPI_DOUBLE => return Some(DtypeId::new(12)),
        MPI_CHAR => return Some(DtypeId::new(0)),
        _ => {}
    }
    match split(h) {
        (DTYPE_CREATED, id) => Some(DtypeId::new(id)),
        _ => PREDEFINED_DTYPES
            .iter()
            .position(|(v, _)| *v == h)
            .map(DtypeId::from_idx),
    }
}

pub fn dtype_handle(id: DtypeId) -> MPI_Datatype {
    match PREDEFINED_DTYPES.get(id.idx()) {
        Some((h, _)) => *h,
        None => (DTYPE_CREATED | id.get()) as i32,
    }
}

/// Request handle -> slot (None for MPI_REQUEST_NULL and garbage).
#[inline(always)]
pub fn request_slot(h: MPI_Request) -> Option<ReqId> {
    match split(h) {
        (REQUEST_DIRECT, id) => Some(ReqId::new(id)),
        _ => None,
    }
}

#[inline(always)]
pub fn request_handle(slot: ReqId) -> MPI_Request {
    (REQUEST_DIRECT | slot.get()) as i32
}

/// A handle value that is not a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadHandle;

/// Message handle -> message id; Ok(None) is MPI_MESSAGE_NO_PROC; Err for invalid handles.
pub fn message_id(h: MPI_Message) -> Result<Option<u32>, BadHandle> {
    if h == MPI_MESSAGE_NO_PROC {
        return Ok(None);
    }
    match split(h) {
        (MESSAGE_CREATED, id) => Ok(Some(id)),
        _ => Err(BadHandle),
    }
}

pub fn message_handle(id: Option<u32>) -> MPI_Message {
    match id {
        None => MPI_MESSAGE_NO_PROC,
        Some(id) => (MESSAGE_CREATED | id) as i32,
    }
}

/// Operation handle -> engine id (None for MPI_OP_NULL and garbage).
#[inline(always)]
pub fn op_id(h: MPI_Op) -> Option<u32> {
    use protean_core::mpi::coll::op::NPREDEFINED;
    match split(h) {
        (OP_BUILTIN, i) if (1..=NPREDEFINED).contains(&i) => Some(i - 1),
        (OP_DIRECT, id) if id >= NPREDEFINED => Some(id),
        _ => None,
    }
}

pub fn op_handle(id: u32) -> MPI_Op {
    if id < protean_core::mpi::coll::op::NPREDEFINED {
        (OP_BUILTIN | (id + 1)) as i32
    } else {
        (OP_DIRECT | id) as i32
    }
}

/// Error handler handle -> engine id.
pub fn errh_id(h: MPI_Errhandler) -> Option<u32> {
    match h {
        MPI_ERRORS_ARE_FATAL => Some(ERRH_FATAL),
        MPI_ERRORS_RETURN => Some(ERRH_RETURN),
        MPI_ERRORS_ABORT => Some(ERRH_ABORT),
        // MPICH's C++ "throw exceptions" handler: there is no C++ binding, so it returns.
        MPIR_ERRORS_THROW_EXCEPTIONS => Some(ERRH_RETURN),
        _ => match split(h) {
            (ERRH_DIRECT, id) if id > ERRH_ABORT => Some(id),
            _ => None,
        },
    }
}

pub fn errh_handle(id: u32) -> MPI_Errhandler {
    match id {
        ERRH_FATAL => MPI_ERRORS_ARE_FATAL,
        ERRH_RETURN => MPI_ERRORS_RETURN,
        ERRH_ABORT => MPI_ERRORS_ABORT,
        _ => (ERRH_DIRECT | id) as i32,
    }
}

/// Group handle -> engine id (MPI_GROUP_EMPTY is id 0).
pub fn group_id(h: MPI_Group) -> Option<u32> {
    match h {
        MPI_GROUP_EMPTY => Some(protean_core::mpi::group::GROUP_EMPTY),
        _ => match split(h) {
            (GROUP_DIRECT, id) if id > 0 => Some(id),
            _ => None,
        },
    }
}

pub fn group_handle(id: u32) -> MPI_Group {
    if id == protean_core::mpi::group::GROUP_EMPTY {
        MPI_GROUP_EMPTY
    } else {
        (GROUP_DIRECT | id) as i32
    }
}

fn kind_bits(k: ObjKind) -> u32 {
    match k {
        ObjKind::Comm => 1,
        ObjKind::Type => 2,
        ObjKind::Win => 3,
    }
}

/// Keyval handle -> engine id, for keyvals of object kind `k` (a keyval of another kind, a
/// predefined keyval or garbage gives None).
pub fn keyval_id(h: c_int, k: ObjKind) -> Option<u32> {
    let h = h as u32;
    (h & !(KEYVAL_ID_MASK | (0xf << 22)) == KEYVAL_DIRECT && (h >> 22) & 0xf == kind_bits(k))
        .then_some(h & KEYVAL_ID_MASK)
}

pub fn keyval_handle(id: u32, k: ObjKind) -> c_int {
    (KEYVAL_DIRECT | kind_bits(k) << 22 | id) as c_int
}

#[cfg(test)]
mod tests {
    use super::*;
    use protean_core::mpi::datatype::PREDEFINED_NAMES;

    #[test]
    fn predefined_dtypes_follow_the_engine_order() {
        assert_eq!(PREDEFINED_DTYPES.len(), PREDEFINED_NAMES.len());
        for (i, ((h, n), e)) in PREDEFINED_DTYPES.iter().zip(PREDEFINED_NAMES).enumerate() {
            assert_eq!(n, e);
            assert_eq!(dtype_id(*h), Some(DtypeId::from_idx(i)), "{n}");
            assert_eq!(dtype_handle(DtypeId::from_idx(i)), *h);
        }
        assert_eq!(dtype_id(MPI_LONG_LONG), dtype_id(MPI_LONG_LONG_INT));
        assert_eq!(dtype_id(MPI_DATATYPE_NULL), None);
        assert_eq!(
            dtype_id(dtype_handle(DtypeId::new(500))),
            Some(DtypeId::new(500))
        );
    }

    #[test]
    fn handles_roundtrip_and_reject_other_kinds() {
        for id in [0u32, 1, 2, 77, ID_MASK] {
            assert_eq!(comm_id(comm_handle(CommId::new(id))), Some(CommId::new(id)));
            assert_eq!(
                request_slot(request_handle(ReqId::new(id))),
                Some(ReqId::new(id))
            );
            assert_eq!(message_id(message_handle(Some(id))), Ok(Some(id)));
            assert_eq!(errh_id(errh_handle(id)), Some(id));
        }
        assert_eq!(comm_id(MPI_COMM_NULL), None);
        assert_eq!(comm_id(request_handle(ReqId::new(5))), None);
        assert_eq!(request_slot(MPI_REQUEST_NULL), None);
        assert_eq!(request_slot(comm_handle(CommId::new(5))), None);
        assert_eq!(message_id(MPI_MESSAGE_NO_PROC), Ok(None));
        assert!(message_id(MPI_MESSAGE_NULL).is_err());
        assert_eq!(errh_id(MPI_ERRHANDLER_NULL), None);
        assert_eq!(comm_id(0x1234), None);
        for id in [1u32, 77, ID_MASK] {
            assert_eq!(group_id(group_handle(id)), Some(id));
        }
        assert_eq!(group_id(MPI_GROUP_EMPTY), Some(0));
        assert_eq!(group_handle(0), MPI_GROUP_EMPTY);
        assert_eq!(group_id(MPI_GROUP_NULL), None);
        assert_eq!(group_id(comm_handle(CommId::new(3))), None);
        for id in [0u32, 5, KEYVAL_ID_MASK] {
            for k in [ObjKind::Comm, ObjKind::Type, ObjKind::Win] {
                let h = keyval_handle(id, k);
                assert_eq!(keyval_id(h, k), Some(id));
                assert_ne!(h, MPI_KEYVAL_INVALID);
            }
            assert_eq!(
                keyval_id(keyval_handle(id, ObjKind::Comm), ObjKind::Type),
                None
            );
        }
        for p in [MPI_KEYVAL_INVALID, MPI_TAG_UB, MPI_WIN_BASE, 0, -1] {
            assert_eq!(keyval_id(p, ObjKind::Comm), None);
        }
    }

    #[test]
    fn op_handles_follow_mpich() {
        assert_eq!(op_id(MPI_MAX), Some(0));
        assert_eq!(op_id(MPI_SUM), Some(protean_core::mpi::coll::op::OP_SUM));
        assert_eq!(op_id(MPI_NO_OP), Some(13));
        assert_eq!(op_id(MPI_OP_NULL), None);
        assert_eq!(op_handle(2), MPI_SUM);
        assert_eq!(op_handle(13), MPI_NO_OP);
        for id in [14u32, 15, 999] {
            assert_eq!(op_id(op_handle(id)), Some(id));
        }
        assert_eq!(op_id(comm_handle(CommId::new(20))), None);
        assert_eq!(MPI_IN_PLACE as *const u8, protean_core::mpi::coll::IN_PLACE);
    }
}
