//! The frame layer (RFC 9113 §4 and §6): the 9-byte header, each frame type's payload, and
//! the error codes.

/// The frame types weft knows (RFC 9113 §6); others are ignored as §5.5 requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    Data,
    Headers,
    Priority,
    RstStream,
    Settings,
    PushPromise,
    Ping,
    GoAway,
    WindowUpdate,
    Continuation,
    Unknown(u8),
}

/// The error codes of RST_STREAM and GOAWAY (RFC 9113 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    NoError,
    Protocol,
    Internal,
    FlowControl,
    SettingsTimeout,
    StreamClosed,
    FrameSize,
    RefusedStream,
    Cancel,
    Compression,
    Connect,
    EnhanceYourCalm,
    InadequateSecurity,
    Http11Required,
    /// A code this implementation does not name (kept as received).
    Other(u32),
}
