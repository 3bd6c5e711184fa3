//! Tests of the code generator in build.rs: the header reader, the constant evaluator, the C to
//! Rust type translation and the emitted shim.  The modules are compiled here a second time.

#[path = "../build/ctype.rs"]
mod ctype;
#[path = "../build/emit.rs"]
mod emit;
#[path = "../build/header.rs"]
mod header;

use std::collections::BTreeMap;

use header::{Header, Value};

const PREAMBLE: &str = "\
typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef long MPI_Aint;
typedef struct ADIOI_FileD *MPI_File;
typedef int (MPI_User_function_x)(void *invec, int *len);
#define MPI_INT ((MPI_Datatype)0x4c000405)
#define MPI_FLOAT_INT ((MPI_Datatype)0x8c000000)
#define MPI_ALIAS MPI_INT
#define MPI_ANY_SOURCE (-2)
#define MPI_IN_PLACE ((void *)-1)
#define MPI_FILE_NULL ((MPI_File)0)
#define MPI_SUM_OF_TWO (MPI_ANY_SOURCE+5)
#define MPI_NAME \"text\"
#define MPI_FUNCTION_ALIAS MPI_Send
#define MPI_Comm_c2f(comm) ((MPI_Fint)(comm))
#define MPIO_Request MPI_Comm
";

fn parse(body: &str) -> Result<Header, String> {
    Header::parse(&format!("{PREAMBLE}{body}"))
}

fn value(h: &Header, name: &str) -> Option<Value> {
    h.defines
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
}

#[test]
fn evaluates_constants_as_c_would() {
    let h = parse("").unwrap();
    assert_eq!(
        value(&h, "MPI_INT"),
        Some(Value::Int(0x4c000405, Some("MPI_Datatype".into())))
    );
    // A cast to a 32-bit handle type wraps like C does.
    assert_eq!(
        value(&h, "MPI_FLOAT_INT"),
        Some(Value::Int(
            0x8c000000u32 as i32 as i64,
            Some("MPI_Datatype".into())
        ))
    );
    assert_eq!(value(&h, "MPI_ALIAS"), value(&h, "MPI_INT"));
    assert_eq!(value(&h, "MPI_ANY_SOURCE"), Some(Value::Int(-2, None)));
    assert_eq!(value(&h, "MPI_SUM_OF_TWO"), Some(Value::Int(3, None)));
    assert_eq!(value(&h, "MPI_IN_PLACE"), Some(Value::Pointer(-1)));
    assert_eq!(value(&h, "MPI_FILE_NULL"), Some(Value::Pointer(0)));
    assert_eq!(value(&h, "MPI_NAME"), Some(Value::Str("text".into())));
    assert_eq!(value(&h, "MPI_Comm_c2f"), None);
    assert!(h
        .skipped_defines
        .contains(&"MPI_FUNCTION_ALIAS".to_string()));
    assert_eq!(
        h.type_macros,
        vec![("MPIO_Request".to_string(), "MPI_Comm".to_string())]
    );
}

#[test]
fn reads_enums_with_explicit_and_implicit_values() {
    let h =
        parse("typedef enum E {\n    A = 5,\n    B,\n    C = A\n} E_t;\nenum F {\n    D = 1\n};\n")
            .unwrap();
    assert_eq!(h.enums.len(), 2);
    assert_eq!(
        h.enums[0].values,
        vec![("A".into(), 5), ("B".into(), 6), ("C".into(), 5)]
    );
    assert_eq!(h.enums[0].typedef.as_deref(), Some("E_t"));
    assert_eq!(h.enums[1].typedef, None);
}

#[test]
fn reads_prototypes_and_requires_twins() {
    let body = "int MPI_Send(const void *buf, int count, MPI_Datatype datatype, MPI_Comm comm);\n\
                int PMPI_Send(const void *buf, int count, MPI_Datatype datatype, MPI_Comm comm);\n\
                int MPI_Pcontrol(const int level, ...);\n\
                int PMPI_Pcontrol(const int level, ...);\n\
                double MPI_Wtime(void);\n\
                double PMPI_Wtime(void);\n\
                int QMPI_Register_tool_name(const char *tool_name, void (*init_function_ptr)(int tool_id));\n";
    let h = parse(body).unwrap();
    let names: Vec<&str> = h.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "MPI_Send",
            "MPI_Pcontrol",
            "MPI_Wtime",
            "QMPI_Register_tool_name"
        ]
    );
    let send = &h.functions[0];
    assert_eq!(send.ret, "int");
    let params: Vec<&str> = send
        .params
        .iter()
        .map(|p| p.name.as_deref().unwrap())
        .collect();
    assert_eq!(params, ["buf", "count", "datatype", "comm"]);
    assert!(h.functions[1].variadic);
    assert!(h.functions[2].params.is_empty());
    assert_eq!(
        h.functions[3].params[1].name.as_deref(),
        Some("init_function_ptr")
    );

    let err = parse("int MPI_Barrier(MPI_Comm comm);\n").unwrap_err();
    assert!(err.contains("PMPI_Barrier"), "{err}");
    let err = parse("int MPI_Barrier(MPI_Comm comm,\n    int x);\n").unwrap_err();
    assert!(err.contains("one prototype per line"), "{err}");
    let err = parse("int MPI_Barrier(MPI_Comm);\nint PMPI_Barrier(MPI_Comm);\n").unwrap_err();
    assert!(err.contains("has no name"), "{err}");
}

#[test]
fn translates_c_declarations_to_rust() {
    let h = parse("").unwrap();
    let t = |decl: &str| {
        let name = header::declared_name(decl, &|n| h.is_type(n));
        ctype::param_type(decl, name.as_deref(), &h).unwrap()
    };
    assert_eq!(t("const void *buf"), "*const c_void");
    assert_eq!(t("int count"), "c_int");
    assert_eq!(t("const int level"), "c_int");
    assert_eq!(t("MPI_Datatype datatype"), "MPI_Datatype");
    assert_eq!(t("char ***argv"), "*mut *mut *mut c_char");
    assert_eq!(t("const int dims[]"), "*const c_int");
    assert_eq!(t("char **array_of_argv[]"), "*mut *mut *mut c_char");
    assert_eq!(t("int ranges[][3]"), "*mut [c_int; 3]");
    assert_eq!(t("MPI_File *fh"), "*mut MPI_File");
    assert_eq!(t("MPI_User_function_x *fn"), "Option<MPI_User_function_x>");
    assert_eq!(t("MPI_User_function_x fn"), "Option<MPI_User_function_x>");
    assert_eq!(
        t("void (*init_function_ptr)(int tool_id)"),
        "Option<unsafe extern \"C\" fn(c_int)>"
    );
    assert_eq!(
        t("void (**function_ptr)(void)"),
        "*mut Option<unsafe extern \"C\" fn()>"
    );
    let o = |decl: &str, name: &str| ctype::object_type(decl, Some(name), &h).unwrap();
    assert_eq!(
        o("int *const MPI_UNWEIGHTED", "MPI_UNWEIGHTED"),
        "*mut c_int"
    );
    assert_eq!(o("MPI_Aint storage[4]", "storage"), "[MPI_Aint; 4]");
    assert!(ctype::param_type("struct_or_union_unknown x", Some("x"), &h).is_err());
}

#[test]
fn shim_forwards_implemented_functions_and_stubs_the_rest() {
    let body = "int MPI_Send(const void *buf, int count, MPI_Datatype datatype, MPI_Comm comm);\n\
                int PMPI_Send(const void *buf, int count, MPI_Datatype datatype, MPI_Comm comm);\n\
                int MPI_Pcontrol(const int level, ...);\n\
                int PMPI_Pcontrol(const int level, ...);\n\
                MPI_File MPI_File_f2c(int file);\n\
                MPI_File PMPI_File_f2c(int file);\n\
                int QMPI_Register_tool_storage(int tool_id, void *tool_storage);\n";
    let h = parse(body).unwrap();
    let mut implemented = BTreeMap::new();
    implemented.insert("MPI_Send".to_string(), "crate::p2p".to_string());
    implemented.insert("MPI_Pcontrol".to_string(), "crate::prof".to_string());
    let c = emit::c_shim(&h, &implemented);

    assert!(c.contains("int PMPI_Send(const void *buf, int count, MPI_Datatype datatype, MPI_Comm comm)\n{\n    return protean_MPI_Send(buf, count, datatype, comm);\n}"), "{c}");
    assert!(c.contains("int MPI_Send(const void *buf, int count, MPI_Datatype datatype, MPI_Comm comm) __attribute__((weak, alias(\"PMPI_Send\")));"));
    // Varargs: the implementation sees the fixed arguments only.
    assert!(c.contains("PROTEAN_HIDDEN int protean_MPI_Pcontrol(const int level);"));
    assert!(c.contains(
        "int PMPI_Pcontrol(const int level, ...)\n{\n    return protean_MPI_Pcontrol(level);\n}"
    ));
    // Not implemented, non-int result.
    assert!(c.contains("MPI_File PMPI_File_f2c(int file)\n{\n    (void)protean_unimplemented(\"MPI_File_f2c\");\n    return 0;\n}"));
    // QMPI functions have no PMPI twin and no alias.
    assert!(c.contains("int QMPI_Register_tool_storage(int tool_id, void *tool_storage)\n{\n    return protean_unimplemented(\"QMPI_Register_tool_storage\");\n}"));
    assert!(!c.contains("PQMPI"));

    let rs = emit::abi_rs(&h, &implemented).unwrap();
    assert!(rs.contains("pub static MISSING: &[&str] = &[\n    \"MPI_File_f2c\",\n    \"QMPI_Register_tool_storage\",\n];"), "{rs}");
    assert!(rs.contains("const _: signatures::MPI_Send = crate::p2p::protean_MPI_Send;"));
    assert!(rs.contains("pub type MPI_Pcontrol = unsafe extern \"C\" fn(c_int) -> c_int;"));
    assert!(rs.contains("pub const MPI_FLOAT_INT: MPI_Datatype = 0x8c000000_u32 as c_int;"));
    assert!(rs.contains("pub const MPI_IN_PLACE: usize = (-1_isize) as usize;"));
}

#[test]
fn reads_the_real_header() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/mpi.h"))
        .unwrap();
    let h = Header::parse(&text).unwrap();
    assert!(h.functions.iter().any(|f| f.name == "MPI_Send"));
    assert_eq!(
        h.functions
            .iter()
            .filter(|f| f.name.starts_with("QMPI_"))
            .count(),
        6
    );
    assert_eq!(
        value(&h, "MPI_COMM_WORLD"),
        Some(Value::Int(0x44000000, Some("MPI_Comm".into())))
    );
    assert_eq!(value(&h, "MPI_STATUS_IGNORE"), Some(Value::Pointer(1)));
    let status = h.structs.iter().find(|s| s.name == "MPI_Status").unwrap();
    let fields: Vec<&str> = status
        .fields
        .iter()
        .map(|f| f.name.as_deref().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "count_lo",
            "count_hi_and_cancelled",
            "MPI_SOURCE",
            "MPI_TAG",
            "MPI_ERROR"
        ]
    );
}
