//! Where a gRPC client's message types come from: `.proto` files compiled in-process by
//! `protox` (no `protoc`), the bundled `grpc.health.v1` service, or a server's reflection
//! (`super::reflection`), each into a `prost-reflect` pool; and a method's name found in one.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use miette::Diagnostic;
use prost_reflect::{DescriptorPool, MethodDescriptor};
use protox::file::{File, FileResolver};

/// The health service's file name, as its published package lays it out.
pub const HEALTH_FILE: &str = "grpc/health/v1/health.proto";
/// The standard health check: `grpc.health.v1.Health/Check`.
pub const HEALTH_CHECK: &str = "grpc.health.v1.Health/Check";
const HEALTH_PROTO: &str = include_str!("health.proto");

/// Why a schema could not be had or a method not found. Every message says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A `.proto` file did not compile; `at` is `file:line:col` when the compiler gave a place.
    #[error("{at}: {message}")]
    Compile { at: String, message: String },
    #[error(
        "`{0}` is no method name: write it as `package.Service/Method` (or `package.Service.Method`)"
    )]
    MethodName(String),
    #[error("no service `{service}` in the schema{}", known_list(.known))]
    NoService { service: String, known: Vec<String> },
    #[error("service `{service}` has no method `{method}`{}", known_list(.known))]
    NoMethod {
        service: String,
        method: String,
        known: Vec<String>,
    },
    #[error("server reflection: {0}")]
    Reflection(String),
    /// The server's reflection answers went past one of sloburn's bounds (an endless stream,
    /// too many bytes, files or services): refused there, the target's failure.
    #[error("server reflection: refused the server's answer, {0}")]
    ReflectionTooLarge(String),
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        String::new()
    } else {
        format!(" (it has: {})", known.join(", "))
    }
}

/// Compiles `files` (each found as given, or under one of `includes`; imports under
/// `includes`, and `google/protobuf/*.proto` built in) with their imports into one pool.
pub fn compile(files: &[PathBuf], includes: &[PathBuf]) -> Result<DescriptorPool, SchemaError> {
    // A file given by a path outside every include path is found through its own folder.
    let mut includes = includes.to_vec();
    for file in files {
        let covered = includes.iter().any(|inc| file.starts_with(inc));
        if !covered && let Some(dir) = file.parent() {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            if !includes.iter().any(|inc| inc == dir) {
                includes.push(dir.to_path_buf());
            }
        }
    }
    let mut compiler = protox::Compiler::new(&includes).map_err(compile_error)?;
    compiler.include_imports(true);
    for file in files {
        compiler.open_file(file).map_err(compile_error)?;
    }
    Ok(compiler.descriptor_pool())
}

/// The bundled `grpc.health.v1` service, compiled once.
pub fn health() -> DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut compiler = protox::Compiler::with_file_resolver(Bundled);
        compiler
            .open_file(HEALTH_FILE)
            .expect("the bundled health.proto compiles (a unit test holds it)");
        compiler.descriptor_pool()
    })
    .clone()
}

/// Serves the bundled health proto to `protox` by its name.
struct Bundled;

impl FileResolver for Bundled {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if name == HEALTH_FILE {
            File::from_source(name, HEALTH_PROTO)
        } else {
            Err(protox::Error::file_not_found(name))
        }
    }
}

/// A compiler error with its place: the file, and the line and column of its first label.
fn compile_error(e: protox::Error) -> SchemaError {
    let file = e.file().unwrap_or("protobuf").to_string();
    let place = e
        .labels()
        .and_then(|mut labels| labels.next())
        .zip(e.source_code())
        .and_then(|(label, code)| code.read_span(label.inner(), 0, 0).ok())
        .map(|span| format!(":{}:{}", span.line() + 1, span.column() + 1));
    SchemaError::Compile {
        at: format!("{file}{}", place.unwrap_or_default()),
        message: e.to_string(),
    }
}

/// Splits `package.Service/Method` (or `package.Service.Method`, with an optional leading
/// `/`) into the service's full name and the method's.
pub fn split_method(name: &str) -> Result<(&str, &str), SchemaError> {
    let bad = || SchemaError::MethodName(name.to_string());
    let trimmed = name.trim_start_matches('/');
    let (service, method) = trimmed
        .rsplit_once('/')
        .or_else(|| trimmed.rsplit_once('.'))
        .ok_or_else(bad)?;
    let ident = |s: &str| {
        !s.is_empty()
            && s.split('.').all(|part| {
                part.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
    };
    if !ident(service) || !ident(method) || method.contains('.') {
        return Err(bad());
    }
    Ok((service, method))
}

/// The method `name` in `pool`; when it is not there, the error lists what is.
pub fn find_method(pool: &DescriptorPool, name: &str) -> Result<MethodDescriptor, SchemaError> {
    let (service, method) = split_method(name)?;
    let Some(svc) = pool.get_service_by_name(service) else {
        return Err(SchemaError::NoService {
            service: service.to_string(),
            known: pool.services().map(|s| s.full_name().to_string()).collect(),
        });
    };
    svc.methods()
        .find(|m| m.name() == method)
        .ok_or_else(|| SchemaError::NoMethod {
            service: service.to_string(),
            method: method.to_string(),
            known: svc.methods().map(|m| m.name().to_string()).collect(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_bundled_health_service_has_check_and_watch() {
        let pool = health();
        let check = find_method(&pool, HEALTH_CHECK).unwrap();
        assert_eq!(
            check.input().full_name(),
            "grpc.health.v1.HealthCheckRequest"
        );
        assert!(!check.is_server_streaming());
        let watch = find_method(&pool, "grpc.health.v1.Health.Watch").unwrap();
        assert!(watch.is_server_streaming());
    }

    #[test]
    fn a_proto_with_an_import_compiles_from_its_own_folder() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "common/msg.proto",
            "syntax = \"proto3\"; package common; message Ping { string text = 1; }",
        );
        let svc = write(
            dir.path(),
            "svc.proto",
            "syntax = \"proto3\"; package demo;\nimport \"common/msg.proto\";\n\
             import \"google/protobuf/empty.proto\";\n\
             service Echo { rpc Say(common.Ping) returns (common.Ping);\n\
             rpc Nothing(google.protobuf.Empty) returns (stream common.Ping); }",
        );
        let pool = compile(&[svc], &[]).unwrap();
        let say = find_method(&pool, "demo.Echo/Say").unwrap();
        assert_eq!(say.output().full_name(), "common.Ping");
        assert!(
            find_method(&pool, "/demo.Echo/Nothing")
                .unwrap()
                .is_server_streaming()
        );
    }

    #[test]
    fn a_compile_error_names_its_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let svc = write(
            dir.path(),
            "bad.proto",
            "syntax = \"proto3\";\npackage demo;\nmessage A {\n  Missing b = 1;\n}\n",
        );
        let err = compile(&[svc], &[]).unwrap_err();
        let SchemaError::Compile { at, message } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(at, "bad.proto:4:3", "{message}");
        assert!(message.contains("Missing"), "{message}");
    }

    #[test]
    fn a_missing_file_is_an_error_not_a_panic() {
        let err = compile(&[PathBuf::from("/nonexistent/x.proto")], &[]).unwrap_err();
        assert!(matches!(err, SchemaError::Compile { .. }), "{err}");
    }

    #[test]
    fn method_names_in_both_spellings_and_bad_ones() {
        assert_eq!(split_method("a.b.Svc/M").unwrap(), ("a.b.Svc", "M"));
        assert_eq!(split_method("a.b.Svc.M").unwrap(), ("a.b.Svc", "M"));
        assert_eq!(split_method("/Svc/M").unwrap(), ("Svc", "M"));
        for bad in ["", "Svc", "a.b/", "/M", "a b/M", "Svc/M.x", "1a/M"] {
            assert!(split_method(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_unknown_service_or_method_lists_what_there_is() {
        let pool = health();
        let err = find_method(&pool, "grpc.health.v1.Health/Chek").unwrap_err();
        assert_eq!(
            err.to_string(),
            "service `grpc.health.v1.Health` has no method `Chek` (it has: Check, Watch)"
        );
        let err = find_method(&pool, "x.Y/Z").unwrap_err();
        assert_eq!(
            err.to_string(),
            "no service `x.Y` in the schema (it has: grpc.health.v1.Health)"
        );
    }
}
