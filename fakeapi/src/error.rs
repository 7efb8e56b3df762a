//! Errors, rendered over HTTP as `meta/v1 Status` objects with the code real
//! clients expect.

use serde_json::{json, Value};
use std::fmt;

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
    /// 409 about one object, as apimachinery's `NewConflict` words it:
    /// `Operation cannot be fulfilled on <resource> "<name>": <cause>`, with
    /// `details` naming the object (`resource` is qualified, `leases.coordination.k8s.io`,
    /// or a subresource, `pods/binding`).
    #[error("Operation cannot be fulfilled on {resource} {}: {cause}", go_quote(.name))]
    Conflict {
        resource: String,
        name: String,
        cause: String,
    },
    #[error("{0}")]
    Gone(String),
    /// 410 `Expired` to a list continued at a compacted version, with the
    /// continue token (the Status's `metadata.continue`) that goes on from
    /// the same key at the latest version, in etcd3's store's words
    /// (`handleCompactedErrorForPaging`).
    #[error("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")]
    InconsistentContinue(String),
    /// 403, as an admission plugin refuses: `pods "p" is forbidden: <why>`.
    #[error("{resource} {} is forbidden: {message}", go_quote(.name))]
    Forbidden {
        resource: String,
        name: String,
        message: String,
    },
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    NotAcceptable(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    Invalid(String),
    /// A 422 with one cause per field, as the real server reports schema
    /// and object validation (`details.causes[].field`).
    #[error("{0}")]
    InvalidFields(Box<InvalidObject>),
    /// A Status with empty `details`, as kube-apiserver's generic errors
    /// (`NewGenericServerResponse`) carry: a failed JSON patch (422), a
    /// patch of an unknown content type (415).
    #[error("{message}")]
    Plain {
        code: u16,
        reason: &'static str,
        message: String,
    },
    /// A 500 with no reason: what kube-apiserver answers when its storage
    /// returns an error that is not a `Status` (`ErrorToAPIStatus`), as a
    /// Binding's validation does.
    #[error("{0}")]
    Storage(String),
    /// A 500 `InternalError` (a webhook that could not be called, with
    /// `failurePolicy: Fail`): the message is `Internal error occurred: `
    /// and this, which is also the one cause of its details.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// A `Status` as someone else wrote it (an admission webhook's denial:
    /// its code, reason, message and details, passed on to the client).
    #[error("{}", .0.message)]
    Status(Box<StatusError>),
}

/// A `Status` of a denial, as [`ApiError::Status`] carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    /// `details`, if any.
    pub details: Option<Value>,
}

impl ApiError {
    pub fn code(&self) -> u16 {
        match self {
            ApiError::BadRequest(_) => 400,
            ApiError::NotFound { .. } | ApiError::NotFoundPath(_) => 404,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::Gone(_) | ApiError::InconsistentContinue(_) => 410,
            ApiError::Forbidden { .. } => 403,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::NotAcceptable(_) => 406,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Invalid(_) | ApiError::InvalidFields(_) => 422,
            ApiError::Internal(_) | ApiError::Storage(_) => 500,
            ApiError::Plain { code, .. } => *code,
            ApiError::Status(s) => s.code,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::NotFound { .. } | ApiError::NotFoundPath(_) => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Gone(_) | ApiError::InconsistentContinue(_) => "Expired",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::Invalid(_) | ApiError::InvalidFields(_) => "Invalid",
            ApiError::Internal(_) => "InternalError",
            ApiError::Status(s) => &s.reason,
            // `StatusReasonUnknown`, which the Status leaves out.
            ApiError::Storage(_) => "",
            ApiError::Plain { reason, .. } => reason,
        }
    }

    /// A 409 on object `name` of `resource` (qualified, or a subresource
    /// such as `pods/binding`) because of `cause`.
    pub(crate) fn conflict(resource: &str, name: &str, cause: impl Into<String>) -> Self {
        ApiError::Conflict {
            resource: resource.to_string(),
            name: name.to_string(),
            cause: cause.into(),
        }
    }

    pub(crate) fn not_found(resource: &str, name: &str) -> Self {
        ApiError::NotFound {
            resource: resource.to_string(),
            name: name.to_string(),
        }
    }

    /// A 422 for object `name` of `kind` in `group` with these causes.
    pub(crate) fn invalid(group: &str, kind: &str, name: &str, causes: Vec<FieldError>) -> Self {
        ApiError::InvalidFields(Box::new(InvalidObject {
            group: group.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
            causes,
        }))
    }

    /// The field causes of a 422, if it has any.
    pub fn causes(&self) -> &[FieldError] {
        match self {
            ApiError::InvalidFields(i) => &i.causes,
            _ => &[],
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
        if self.reason().is_empty() {
            status.as_object_mut().expect("an object").remove("reason");
        }
        // `StatusDetails`: empty fields left out (`omitempty`), as in Go.
        let details = |name: &str, group: &str, kind: &str| {
            let mut d = serde_json::Map::new();
            for (k, v) in [("name", name), ("group", group), ("kind", kind)] {
                if !v.is_empty() {
                    d.insert(k.to_string(), json!(v));
                }
            }
            d
        };
        match self {
            ApiError::NotFound { resource, name }
            | ApiError::AlreadyExists { resource, name }
            | ApiError::Conflict { resource, name, .. }
            | ApiError::Forbidden { resource, name, .. } => {
                let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
                status["details"] = Value::Object(details(name, group, kind));
            }
            ApiError::InvalidFields(i) => {
                let causes: Vec<Value> = i
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.kind.reason(), "message": c.body(), "field": c.field}))
                    .collect();
                let mut d = details(&i.name, &i.group, &i.kind);
                d.insert("causes".to_string(), Value::Array(causes));
                status["details"] = Value::Object(d);
            }
            ApiError::Plain { .. } => status["details"] = json!({}),
            ApiError::Internal(m) => {
                status["details"] = json!({"causes": [{"message": m}]});
            }
            ApiError::InconsistentContinue(token) => {
                status["metadata"] = json!({"continue": token});
            }
            ApiError::Status(s) => {
                if s.reason.is_empty() {
                    if let Some(o) = status.as_object_mut() {
                        o.remove("reason");
                    }
                }
                if let Some(d) = &s.details {
                    status["details"] = d.clone();
                }
            }
            _ => {}
        }
        status
    }
}

/// The object a 422 is about and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidObject {
    pub group: String,
    pub kind: String,
    pub name: String,
    pub causes: Vec<FieldError>,
}

impl fmt::Display for InvalidObject {
    /// `PodGroup.scheduling.x-k8s.io "pg" is invalid: spec.minMember: ...`,
    /// several causes in brackets, as apimachinery's `NewInvalid` words it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{} {:?} is invalid", self.kind, self.name)?;
        } else {
            write!(f, "{}.{} {:?} is invalid", self.kind, self.group, self.name)?;
        }
        let mut msgs: Vec<String> = Vec::new();
        for c in &self.causes {
            let m = c.to_string();
            if !msgs.contains(&m) {
                msgs.push(m);
            }
        }
        match msgs.len() {
            0 => Ok(()),
            1 => write!(f, ": {}", msgs[0]),
            _ => write!(f, ": [{}]", msgs.join(", ")),
        }
    }
}

/// The kinds of field errors (apimachinery's `field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    Required,
    Invalid,
    TypeInvalid,
    NotSupported,
    Forbidden,
    Duplicate,
    TooLong,
    TooMany,
}

impl FieldErrorKind {
    /// `details.causes[].reason`.
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
        }
    }

    fn label(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
        }
    }
}

/// One field error: `spec.minMember: Invalid value: "string": ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub kind: FieldErrorKind,
    /// The field path (`spec.minMember`, `spec.versions[0].name`).
    pub field: String,
    /// The bad value as the real server prints it (`"x"`, `0`, `["a"]`);
    /// `None` for the kinds that print none (Required, Forbidden, Too long).
    pub value: Option<String>,
    pub detail: String,
}

impl FieldError {
    pub(crate) fn new(
        kind: FieldErrorKind,
        field: impl Into<String>,
        value: Option<String>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }

    pub(crate) fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Required, field, None, detail)
    }

    pub(crate) fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Forbidden, field, None, detail)
    }

    /// `Invalid value: <value>: <detail>` with `value` printed as Go does.
    pub(crate) fn invalid(
        field: impl Into<String>,
        value: &Value,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(
            FieldErrorKind::Invalid,
            field,
            Some(go_value(value)),
            detail,
        )
    }

    /// `Unsupported value: <value>: supported values: "a", "b"`.
    pub(crate) fn not_supported(
        field: impl Into<String>,
        value: &Value,
        supported: &[String],
    ) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(
            FieldErrorKind::NotSupported,
            field,
            Some(go_value(value)),
            detail,
        )
    }

    /// What follows the field in the message (`ErrorBody` in apimachinery).
    pub fn body(&self) -> String {
        let mut s = self.kind.label().to_string();
        if let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// A string as Go's `%q` prints it.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A float as Go's `%v` prints it (shortest form, exponent from 1e+06 up
/// or below 1e-04).
pub(crate) fn go_float(f: f64) -> String {
    if f == 0.0 {
        return "0".into();
    }
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    if (-4..6).contains(&exp) {
        format!("{f}")
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// A JSON value as apimachinery prints a bad value: strings quoted,
/// numbers and booleans bare, anything else as JSON.
pub(crate) fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => go_quote(s),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => go_float(f),
            _ => n.to_string(),
        },
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

pub type Result<T, E = ApiError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_as_go_prints_them() {
        assert_eq!(go_float(1.0), "1");
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(1234567.0), "1.234567e+06");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
        assert_eq!(go_value(&json!("a\"b")), r#""a\"b""#);
        assert_eq!(go_value(&json!(3)), "3");
        assert_eq!(go_value(&json!(["a"])), r#"["a"]"#);
    }

    #[test]
    fn invalid_status_has_causes_and_the_real_message() {
        let e = ApiError::invalid(
            "scheduling.x-k8s.io",
            "PodGroup",
            "pg",
            vec![FieldError::new(
                FieldErrorKind::TypeInvalid,
                "spec.minMember",
                Some(go_quote("string")),
                "spec.minMember in body must be of type integer: \"string\"",
            )],
        );
        assert_eq!(
            e.to_string(),
            r#"PodGroup.scheduling.x-k8s.io "pg" is invalid: spec.minMember: Invalid value: "string": spec.minMember in body must be of type integer: "string""#
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["reason"], "Invalid");
        assert_eq!(s["details"]["causes"][0]["field"], "spec.minMember");
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueTypeInvalid");
    }
}
