//! gRPC calls measured as HTTP requests are: a schema from `.proto` files (compiled in-process),
//! server reflection or the bundled health service; unary, server- and bidirectional-streaming
//! calls with messages in JSON; one HTTP/2 connection per user through sloburn's own dialler;
//! and each call's result as an [`Outcome`](crate::http::Outcome) (its `status` the gRPC
//! status code, its `error` only a transport failure or the deadline).

pub mod call;
pub mod conn;
pub mod reflection;
pub mod schema;
pub mod target;

pub use call::{Call, CallError, is_reserved_metadata};
pub use conn::{AddressError, GrpcClient, GrpcConn};
pub use reflection::reflect;
pub use schema::{HEALTH_CHECK, SchemaError, compile, find_method, health};
pub use target::{GrpcSpec, GrpcTarget, PrepareError, Source};
