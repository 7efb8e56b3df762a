//! Errors, rendered over HTTP as `meta/v1 Status` objects with the code real
//! clients expect.

use serde_json::{json, Value};

/// An API error; each variant maps to one HTTP code and `Status.reason`.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{resource} \"{name}\" not found")]
    NotFound { resource: String, name: String },
    #[error("{0}")]
    NotFoundPath(String),
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists { resource: String, name: String },
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Gone(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    NotAcceptable(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    Invalid(String),
}

impl ApiError {
    pub fn code(&self) -> u16 {
        match self {
            ApiError::BadRequest(_) => 400,
            ApiError::NotFound { .. } | ApiError::NotFoundPath(_) => 404,
            ApiError::AlreadyExists { .. } | ApiError::Conflict(_) => 409,
            ApiError::Gone(_) => 410,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::NotAcceptable(_) => 406,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Invalid(_) => 422,
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::NotFound { .. } | ApiError::NotFoundPath(_) => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict(_) => "Conflict",
            ApiError::Gone(_) => "Expired",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::Invalid(_) => "Invalid",
        }
    }

    pub(crate) fn not_found(resource: &str, name: &str) -> Self {
        ApiError::NotFound {
            resource: resource.to_string(),
            name: name.to_string(),
        }
    }

    /// The `Status` object real API servers send for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        match self {
            ApiError::NotFound { resource, name } | ApiError::AlreadyExists { resource, name } => {
                let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
                status["details"] = json!({"name": name, "group": group, "kind": kind});
            }
            _ => {}
        }
        status
    }
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;
