//! A server's own schema, through gRPC server reflection: `grpc.reflection.v1`, and
//! `grpc.reflection.v1alpha` when the server does not serve v1 (`UNIMPLEMENTED`).
//!
//! The messages are the published ones as `tonic-reflection` ships them (its generated types,
//! without its server). v1 is v1alpha copied under a new package name, so one set of messages
//! speaks both: only the method's path differs. Each round is one call with a finite list of
//! requests: list the services, ask for the file of each, then for any import still missing,
//! until every file's imports are had (at most [`MAX_ROUNDS`]).
//!
//! Bounds, whatever the server sends: one answer per request in each round (a longer stream,
//! an endless one say, is refused at the first answer past it), each message at most tonic's
//! 4 MiB, [`MAX_ANSWER_BYTES`] of answers in all, [`MAX_FILES`] files and services, and the
//! target's timeout for the whole walk. Past a bound: [`SchemaError::ReflectionTooLarge`].

use std::collections::BTreeMap;
use std::time::Duration;

use prost::Message as _;
use prost_reflect::DescriptorPool;
use prost_types::FileDescriptorProto;
use tokio::time::{Instant, timeout_at};
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

use super::conn::{GrpcConn, transport_class};
use super::schema::SchemaError;
use crate::http::Phases;

const V1: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
const V1ALPHA: &str = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
/// Rounds of import look-ups: a chain of imports deeper than this is refused.
pub const MAX_ROUNDS: usize = 16;
/// Files taken from one server (and services listed), at most.
pub const MAX_FILES: usize = 1_000;
/// Answer bytes (protobuf) taken from one server over every round, at most.
pub const MAX_ANSWER_BYTES: usize = 32 << 20;

/// What is left of the bounds on answers while the walk goes on.
struct Budget {
    bytes: usize,
}

impl Budget {
    fn take(&mut self, answer: &ServerReflectionResponse) -> Result<(), SchemaError> {
        self.bytes = self
            .bytes
            .checked_sub(answer.encoded_len())
            .ok_or_else(|| {
                SchemaError::ReflectionTooLarge(format!(
                    "its answers went past {} MiB",
                    MAX_ANSWER_BYTES >> 20
                ))
            })?;
        Ok(())
    }
}

/// The pool of every service the server lists (but reflection itself) with their imports,
/// asked over `conn`, all within `timeout`.
pub async fn reflect(
    conn: &mut GrpcConn,
    timeout: Duration,
) -> Result<DescriptorPool, SchemaError> {
    let deadline = crate::clock::tokio_instant() + timeout;
    match timeout_at(deadline, walk(conn, deadline)).await {
        Ok(result) => result,
        Err(_) => Err(SchemaError::Reflection(format!(
            "no complete answer within {}",
            crate::units::format_duration(timeout)
        ))),
    }
}

async fn walk(conn: &mut GrpcConn, deadline: Instant) -> Result<DescriptorPool, SchemaError> {
    let list = vec![MessageRequest::ListServices(String::new())];
    let budget = &mut Budget {
        bytes: MAX_ANSWER_BYTES,
    };
    let (path, answers) = match round(conn, V1, list.clone(), deadline, budget).await {
        Err(Failed::Status(status)) if status.code() == tonic::Code::Unimplemented => {
            (V1ALPHA, round(conn, V1ALPHA, list, deadline, budget).await?)
        }
        other => (V1, other?),
    };
    let mut services = Vec::new();
    for answer in answers {
        match answer {
            MessageResponse::ListServicesResponse(list) => {
                services.extend(list.service.into_iter().map(|s| s.name));
            }
            other => return Err(unexpected(other)),
        }
    }
    services.retain(|s| !s.starts_with("grpc.reflection."));
    if services.len() > MAX_FILES {
        return Err(SchemaError::ReflectionTooLarge(format!(
            "it lists more than {MAX_FILES} services"
        )));
    }
    if services.is_empty() {
        return Err(SchemaError::Reflection(
            "the server lists no service but reflection".into(),
        ));
    }

    let mut files: BTreeMap<String, FileDescriptorProto> = BTreeMap::new();
    let mut asks: Vec<MessageRequest> = services
        .into_iter()
        .map(MessageRequest::FileContainingSymbol)
        .collect();
    for _ in 0..MAX_ROUNDS {
        if asks.is_empty() {
            break;
        }
        let answers = round(conn, path, std::mem::take(&mut asks), deadline, budget).await?;
        for answer in answers {
            match answer {
                MessageResponse::FileDescriptorResponse(found) => {
                    for bytes in found.file_descriptor_proto {
                        let file = FileDescriptorProto::decode(bytes.as_slice()).map_err(|e| {
                            SchemaError::Reflection(format!(
                                "a file descriptor does not decode: {e}"
                            ))
                        })?;
                        files.insert(file.name().to_string(), file);
                    }
                }
                other => return Err(unexpected(other)),
            }
        }
        if files.len() > MAX_FILES {
            return Err(SchemaError::ReflectionTooLarge(format!(
                "its schema has more than {MAX_FILES} files"
            )));
        }
        asks = missing(&mut files);
    }
    if !asks.is_empty() {
        return Err(SchemaError::Reflection(format!(
            "imports still missing after {MAX_ROUNDS} rounds"
        )));
    }
    let mut pool = DescriptorPool::new();
    pool.add_file_descriptor_protos(files.into_values())
        .map_err(|e| {
            SchemaError::Reflection(format!("the server's descriptors do not fit together: {e}"))
        })?;
    Ok(pool)
}

/// The imports no file in `files` answers; a `google/protobuf/` one the server left out is
/// taken from the well-known types built in.
fn missing(files: &mut BTreeMap<String, FileDescriptorProto>) -> Vec<MessageRequest> {
    let mut asks = Vec::new();
    let imports: Vec<String> = files
        .values()
        .flat_map(|f| f.dependency.iter().cloned())
        .collect();
    for import in imports {
        if files.contains_key(&import) {
            continue;
        }
        if let Some(known) = DescriptorPool::global().get_file_by_name(&import) {
            files.insert(import, known.file_descriptor_proto().clone());
        } else if !asks.contains(&MessageRequest::FileByFilename(import.clone())) {
            asks.push(MessageRequest::FileByFilename(import));
        }
    }
    asks
}

/// Why a round failed: the server's status, or an answer past a bound.
enum Failed {
    Status(tonic::Status),
    Bound(SchemaError),
}

impl From<tonic::Status> for Failed {
    fn from(status: tonic::Status) -> Failed {
        Failed::Status(status)
    }
}

impl From<Failed> for SchemaError {
    fn from(f: Failed) -> SchemaError {
        match f {
            Failed::Status(status) => failed(status),
            Failed::Bound(e) => e,
        }
    }
}

/// One reflection call: `requests` in, every answer out (an error answer as an error). The
/// protocol answers each request once: an answer past their count ends the call refused, as
/// does one past what is left of `budget`.
async fn round(
    conn: &mut GrpcConn,
    path: &'static str,
    requests: Vec<MessageRequest>,
    deadline: Instant,
    budget: &mut Budget,
) -> Result<Vec<MessageResponse>, Failed> {
    let asked = requests.len();
    let mut phases = Phases::default();
    let ready = conn
        .ready(deadline, &mut phases)
        .await
        .map_err(|class| tonic::Status::from_error(Box::new(super::conn::Transport(class))))?;
    let mut grpc = tonic::client::Grpc::with_origin(ready.service, conn.client().origin().clone());
    grpc.ready()
        .await
        .map_err(|t| tonic::Status::from_error(Box::new(t)))?;
    let requests = requests.into_iter().map(|r| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(r),
    });
    let codec =
        tonic_prost::ProstCodec::<ServerReflectionRequest, ServerReflectionResponse>::default();
    let response = grpc
        .streaming(
            tonic::Request::new(tokio_stream::iter(requests)),
            http::uri::PathAndQuery::from_static(path),
            codec,
        )
        .await?;
    let mut stream = response.into_inner();
    let mut answers = Vec::new();
    while let Some(answer) = stream.message().await? {
        budget.take(&answer).map_err(Failed::Bound)?;
        if answers.len() == asked {
            return Err(Failed::Bound(SchemaError::ReflectionTooLarge(format!(
                "it sent more answers than the {asked} asked for"
            ))));
        }
        match answer.message_response {
            Some(MessageResponse::ErrorResponse(e)) => {
                return Err(Failed::Status(tonic::Status::new(
                    tonic::Code::from_i32(e.error_code),
                    e.error_message,
                )));
            }
            Some(other) => answers.push(other),
            None => {}
        }
    }
    Ok(answers)
}

fn failed(status: tonic::Status) -> SchemaError {
    SchemaError::Reflection(match transport_class(&status) {
        Some(class) => format!("the server could not be reached ({})", class.as_str()),
        None if status.code() == tonic::Code::Unimplemented => {
            "the server does not serve grpc.reflection (v1 nor v1alpha): give the .proto files"
                .to_string()
        }
        None => format!(
            "the server answered {:?}: {}",
            status.code(),
            status.message()
        ),
    })
}

fn unexpected(answer: MessageResponse) -> SchemaError {
    let what = match answer {
        MessageResponse::FileDescriptorResponse(_) => "files",
        MessageResponse::AllExtensionNumbersResponse(_) => "extension numbers",
        MessageResponse::ListServicesResponse(_) => "a service list",
        MessageResponse::ErrorResponse(_) => "an error",
    };
    SchemaError::Reflection(format!("the server answered with {what} out of turn"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, deps: &[&str]) -> FileDescriptorProto {
        FileDescriptorProto {
            name: Some(name.into()),
            dependency: deps.iter().map(|d| d.to_string()).collect(),
            ..FileDescriptorProto::default()
        }
    }

    #[test]
    fn missing_imports_are_asked_once_and_well_known_ones_come_built_in() {
        let mut files = BTreeMap::new();
        files.insert(
            "a.proto".into(),
            file("a.proto", &["b.proto", "google/protobuf/empty.proto"]),
        );
        files.insert("c.proto".into(), file("c.proto", &["b.proto", "a.proto"]));
        let asks = missing(&mut files);
        assert_eq!(asks, vec![MessageRequest::FileByFilename("b.proto".into())]);
        assert!(files.contains_key("google/protobuf/empty.proto"));
    }
}
