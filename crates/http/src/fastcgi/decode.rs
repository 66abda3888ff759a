//! The application's response, decoded incrementally: record headers checked, content handed
//! out as it arrives, padding skipped.

use std::num::NonZeroU16;

use super::{protocol_status, DecodeError, RecordType, HEADER_LEN, VERSION_1};

/// The length of an END_REQUEST record's content (specification §5.5).
const END_BODY_LEN: usize = 8;

/// What the application sent, as [`Decoder::decode`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// Bytes of the STDOUT stream (the CGI response), borrowed from the input; never empty,
    /// never more than one record's content.
    Stdout(&'a [u8]),
    /// Bytes of the STDERR stream (messages for the error log), as [`Event::Stdout`].
    Stderr(&'a [u8]),
    /// END_REQUEST with FCGI_REQUEST_COMPLETE, its padding consumed: the response is over.
    /// `app_status` is the application's exit status (0 for success; php-fpm always sends 0).
    /// The other protocol statuses are errors ([`DecodeError::Overloaded`] and the like).
    End { app_status: u32 },
}

/// What one call to [`Decoder::decode`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step<'a> {
    /// Bytes of the input consumed. With no event, that is all of it.
    pub consumed: usize,
    /// At most one event, from bytes within the consumed part.
    pub event: Option<Event<'a>>,
}

/// Where the decoder is in the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between records: `have` bytes of the next header are in `Decoder::head`.
    Header { have: u8 },
    /// Inside a STDOUT or STDERR record: `left` content bytes, then `padding`.
    Stream {
        stream: Stream,
        left: u16,
        padding: u8,
    },
    /// Bytes to skip (padding, or a management record whole), then a header.
    Skip { left: u32 },
    /// Inside END_REQUEST's content: `have` bytes of it are in `Decoder::end`.
    EndBody { have: u8, padding: u8 },
    /// END_REQUEST read and complete; `left` bytes of its padding still to come.
    EndPadding { left: u8, app_status: u32 },
    /// The response is over; nothing may follow.
    Done,
    /// An error, returned again on every call.
    Failed(DecodeError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// An incremental decoder for the response to one request. Feed it every byte read from the
/// connection with [`Decoder::decode`]; at the end of the connection, ask [`Decoder::finish`].
/// Its size is fixed (no heap): one record header and one END_REQUEST body at most are kept
/// between calls.
#[derive(Debug, Clone)]
pub struct Decoder {
    request_id: u16,
    state: State,
    head: [u8; HEADER_LEN],
    end: [u8; END_BODY_LEN],
    /// The empty record that ends the stream has come.
    stdout_closed: bool,
    stderr_closed: bool,
}

impl Decoder {
    /// A decoder for the response to request `request_id`.
    pub fn new(request_id: NonZeroU16) -> Decoder {
        Decoder {
            request_id: request_id.get(),
            state: State::Header { have: 0 },
            head: [0; HEADER_LEN],
            end: [0; END_BODY_LEN],
            stdout_closed: false,
            stderr_closed: false,
        }
    }

    /// True once END_REQUEST with FCGI_REQUEST_COMPLETE has been read, padding and all, and
    /// nothing after it. Then the connection may carry the next request, provided the caller
    /// has no bytes left over and has written the whole request (see the module docs).
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input` until the first event (returned with the bytes consumed up to
    /// it) or the end of the input (all consumed, no event). Call it again with the rest of
    /// the input; a `Step` with no event asks for more bytes. After [`Event::End`] any byte is
    /// [`DecodeError::AfterEnd`]. An error is final: every later call returns it again.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Step<'a>, DecodeError> {
        let mut i = 0;
        loop {
            let rest = &input[i..];
            let (used, event) = match self.state {
                State::Failed(e) => return Err(e),
                State::Done if rest.is_empty() => (0, None),
                State::Done => return Err(self.fail(DecodeError::AfterEnd)),
                _ if rest.is_empty() => (0, None),
                State::Header { have } => (self.header(have, rest)?, None),
                State::Stream {
                    stream,
                    left,
                    padding,
                } => self.stream(stream, left, padding, rest),
                State::Skip { left } => (self.skip(left, rest), None),
                State::EndBody { have, padding } => self.end_body(have, padding, rest)?,
                State::EndPadding { left, app_status } => self.end_padding(left, app_status, rest),
            };
            i += used;
            if event.is_some() || i == input.len() {
                return Ok(Step { consumed: i, event });
            }
        }
    }

    /// The verdict at the end of the connection: fine if the response was complete,
    /// [`DecodeError::Truncated`] if it stopped short (inside a record or between records
    /// before END_REQUEST), or the error already returned.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.state {
            State::Done => Ok(()),
            State::Failed(e) => Err(e),
            _ => Err(DecodeError::Truncated),
        }
    }

    fn fail(&mut self, e: DecodeError) -> DecodeError {
        self.state = State::Failed(e);
        e
    }

    /// Header bytes, with `have` already kept; a whole header starts its record.
    fn header(&mut self, have: u8, rest: &[u8]) -> Result<usize, DecodeError> {
        let have = usize::from(have);
        let take = (HEADER_LEN - have).min(rest.len());
        self.head[have..have + take].copy_from_slice(&rest[..take]);
        self.state = if have + take < HEADER_LEN {
            State::Header {
                have: (have + take) as u8,
            }
        } else {
            self.record().map_err(|e| self.fail(e))?
        };
        Ok(take)
    }

    /// The state a whole header in `self.head` leads to.
    fn record(&mut self) -> Result<State, DecodeError> {
        let [version, kind, id1, id0, len1, len0, padding, _reserved] = self.head;
        if version != VERSION_1 {
            return Err(DecodeError::BadVersion(version));
        }
        let kind = RecordType::from_u8(kind).ok_or(DecodeError::UnknownType(kind))?;
        let id = u16::from_be_bytes([id1, id0]);
        let len = u16::from_be_bytes([len1, len0]);
        match kind {
            RecordType::Stdout | RecordType::Stderr => {
                let (stream, closed) = if kind == RecordType::Stdout {
                    (Stream::Stdout, &mut self.stdout_closed)
                } else {
                    (Stream::Stderr, &mut self.stderr_closed)
                };
                if id != self.request_id {
                    return Err(DecodeError::WrongRequestId(id));
                }
                if *closed {
                    return Err(DecodeError::StreamClosed(kind));
                }
                if len == 0 {
                    *closed = true;
                    return Ok(skip(u32::from(padding)));
                }
                Ok(State::Stream {
                    stream,
                    left: len,
                    padding,
                })
            }
            RecordType::EndRequest if id != self.request_id => Err(DecodeError::WrongRequestId(id)),
            RecordType::EndRequest if usize::from(len) != END_BODY_LEN => {
                Err(DecodeError::EndRequestLength(len))
            }
            RecordType::EndRequest => Ok(State::EndBody { have: 0, padding }),
            // Answers to management queries this decoder never asked: harmless, skipped.
            RecordType::GetValuesResult | RecordType::UnknownType if id == 0 => {
                Ok(skip(u32::from(len) + u32::from(padding)))
            }
            RecordType::GetValuesResult | RecordType::UnknownType => {
                Err(DecodeError::WrongRequestId(id))
            }
            RecordType::BeginRequest
            | RecordType::AbortRequest
            | RecordType::Params
            | RecordType::Stdin
            | RecordType::Data
            | RecordType::GetValues => Err(DecodeError::UnexpectedType(kind)),
        }
    }

    /// Content of a STDOUT or STDERR record, handed out as it is.
    fn stream<'a>(
        &mut self,
        stream: Stream,
        left: u16,
        padding: u8,
        rest: &'a [u8],
    ) -> (usize, Option<Event<'a>>) {
        let take = usize::from(left).min(rest.len());
        let left = left - take as u16;
        self.state = if left > 0 {
            State::Stream {
                stream,
                left,
                padding,
            }
        } else {
            skip(u32::from(padding))
        };
        let data = &rest[..take];
        let event = match stream {
            Stream::Stdout => Event::Stdout(data),
            Stream::Stderr => Event::Stderr(data),
        };
        (take, Some(event))
    }

    fn skip(&mut self, left: u32, rest: &[u8]) -> usize {
        let take = rest.len().min(left as usize);
        self.state = skip(left - take as u32);
        take
    }

    /// END_REQUEST's content, kept until all 8 bytes are there.
    fn end_body<'a>(
        &mut self,
        have: u8,
        padding: u8,
        rest: &[u8],
    ) -> Result<(usize, Option<Event<'a>>), DecodeError> {
        let have = usize::from(have);
        let take = (END_BODY_LEN - have).min(rest.len());
        self.end[have..have + take].copy_from_slice(&rest[..take]);
        if have + take < END_BODY_LEN {
            self.state = State::EndBody {
                have: (have + take) as u8,
                padding,
            };
            return Ok((take, None));
        }
        let [s3, s2, s1, s0, status, ..] = self.end;
        let app_status = u32::from_be_bytes([s3, s2, s1, s0]);
        let refused = match status {
            protocol_status::REQUEST_COMPLETE => None,
            protocol_status::CANT_MPX_CONN => Some(DecodeError::CantMpxConn),
            protocol_status::OVERLOADED => Some(DecodeError::Overloaded),
            protocol_status::UNKNOWN_ROLE => Some(DecodeError::UnknownRole),
            s => Some(DecodeError::UnknownProtocolStatus(s)),
        };
        if let Some(e) = refused {
            return Err(self.fail(e));
        }
        self.state = State::EndPadding {
            left: padding,
            app_status,
        };
        Ok((take, self.ended()))
    }

    fn end_padding<'a>(
        &mut self,
        left: u8,
        app_status: u32,
        rest: &[u8],
    ) -> (usize, Option<Event<'a>>) {
        let take = rest.len().min(usize::from(left));
        self.state = State::EndPadding {
            left: left - take as u8,
            app_status,
        };
        (take, self.ended())
    }

    /// [`Event::End`] once END_REQUEST's padding is all consumed.
    fn ended<'a>(&mut self) -> Option<Event<'a>> {
        match self.state {
            State::EndPadding {
                left: 0,
                app_status,
            } => {
                self.state = State::Done;
                Some(Event::End { app_status })
            }
            _ => None,
        }
    }
}

/// Skipping `left` bytes, or at the next header if there are none.
fn skip(left: u32) -> State {
    if left == 0 {
        State::Header { have: 0 }
    } else {
        State::Skip { left }
    }
}
