//! The wire between the nodes of a cluster: every message one node sends
//! another is a [`Frame`] — `{version, kind, id, body}` — in MessagePack.
//!
//! Why a frame of our own inside ractor_cluster's transport: ractor_cluster
//! moves bytes between actors (and authenticates the nodes), but what the
//! bytes mean must survive a rolling upgrade, where one node runs a newer
//! troupe than the other. So every frame says its version; fields are
//! encoded by name (`rmp_serde::to_vec_named`), so a node one minor version
//! newer may add a field and an older node ignores it; a different major
//! version is refused with what to do.
//!
//! Bytes from another node are checked before anything is decoded: the
//! frame's size against [`MAX_FRAME`], and the nesting of its maps and arrays
//! against [`MAX_DEPTH`] by a scan that does not recurse ([`check`]) —
//! rmp-serde's own recursion would overflow the stack on a deep enough
//! document before it errors.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::id::{BotId, HouseId};
use crate::protocol::Envelope;

/// The wire's version this build speaks.
pub const VERSION: Version = Version { major: 1, minor: 4 };

/// The largest frame accepted from another node, in bytes.
pub const MAX_FRAME: usize = 4 * 1024 * 1024;

/// The deepest nesting of maps and arrays accepted in a frame. A frame
/// wraps an envelope in a few levels; the envelope's own data is held to
/// `depth::MAX_DEPTH` (64) where it was made.
pub const MAX_DEPTH: usize = 96;

/// A wire version: nodes of the same major version interoperate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    /// Changes when an older node could not read the frames.
    pub major: u16,
    /// Changes when fields or kinds are added.
    pub minor: u16,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What a frame carries, by its `kind`.
pub mod kind {
    /// A node asks another who it is: [`super::HelloRequest`] → [`super::Hello`].
    pub const HELLO: &str = "hello";
    /// A durable message for an actor of the receiving node:
    /// [`super::Delivery`] → [`super::Ack`].
    pub const ENVELOPE: &str = "envelope";
    /// The receiver committed (or had already committed) a delivery.
    pub const ACK: &str = "ack";
    /// The receiver refused a frame; [`super::Refusal`] says why.
    pub const REFUSED: &str = "refused";
    /// A node tells a peer the houses it hosts now (since 1.1):
    /// [`super::Houses`] → [`super::Ack`].
    pub const HOUSES: &str = "houses";
    /// A node tells a peer the actor kinds registered on it now (since
    /// 1.4): [`super::Kinds`] → [`super::Ack`].
    pub const KINDS: &str = "kinds";
    /// A node asks a peer to make a house there (since 1.1):
    /// [`super::HouseCreate`] → [`super::HouseMade`].
    pub const HOUSE_CREATE: &str = "house_create";
    /// The answer to [`HOUSE_CREATE`].
    pub const HOUSE_MADE: &str = "house_made";
    /// An HTTP request for a house the receiving node hosts, made to
    /// another node (since 1.1): [`super::HttpRequest`] → [`super::HttpResponse`].
    pub const HTTP: &str = "http";
    /// The answer to [`HTTP`].
    pub const HTTP_ANSWER: &str = "http_answer";
    /// A WebSocket stream for a house the receiving node hosts, opened on
    /// another node (since 1.2): [`super::StreamOpen`] →
    /// [`STREAM_ACCEPTED`] or [`STREAM_REFUSED`]. The frame's id is the
    /// stream's, in every frame of the stream.
    pub const STREAM_OPEN: &str = "stream_open";
    /// The receiving node's router upgraded the stream: messages may flow
    /// ([`super::StreamAccepted`]).
    pub const STREAM_ACCEPTED: &str = "stream_accepted";
    /// The receiving node's router answered the upgrade otherwise (its
    /// token check, its 404): that answer ([`super::HttpResponse`]).
    pub const STREAM_REFUSED: &str = "stream_refused";
    /// Messages of a stream, either way: [`super::StreamData`] →
    /// [`STREAM_ACK`].
    pub const STREAM_DATA: &str = "stream_data";
    /// One side of a stream closed it, either way: [`super::StreamClose`]
    /// → [`STREAM_ACK`].
    pub const STREAM_CLOSE: &str = "stream_close";
    /// Whether the stream is still open at the receiver ([`super::StreamAck`]).
    pub const STREAM_ACK: &str = "stream_ack";
    /// A piece of a house moving to the receiving node (since 1.3):
    /// [`super::HouseMovePart`] → [`ACK`].
    pub const HOUSE_MOVE_PART: &str = "house_move_part";
    /// Every piece sent: the receiving node takes the house
    /// ([`super::HouseMoveCommit`] → [`HOUSE_MOVE_DONE`]).
    pub const HOUSE_MOVE_COMMIT: &str = "house_move_commit";
    /// The sender cannot tell whether a move was committed: the receiver
    /// says, refusing it from now on if it was not
    /// ([`super::HouseMoveRefuse`] → [`HOUSE_MOVE_DONE`]).
    pub const HOUSE_MOVE_REFUSE: &str = "house_move_refuse";
    /// Whether the receiving node took the house ([`super::HouseMoveDone`]).
    pub const HOUSE_MOVE_DONE: &str = "house_move_done";
    /// An HTTP request whose body is over one frame (since 1.3): its head
    /// and the body's first piece ([`super::HttpRequest`]) → [`HTTP_ACK`].
    /// The frame's id names the exchange, in every frame of it.
    pub const HTTP_OPEN: &str = "http_open";
    /// A piece of a body, either way (since 1.3): of the request, sent
    /// after [`HTTP_OPEN`] and answered with [`HTTP_ACK`]; of the answer, in
    /// answer to [`HTTP_NEXT`] ([`super::BodyPiece`]).
    pub const HTTP_BODY: &str = "http_body";
    /// The receiver queued a request's piece, or no longer reads the body
    /// (its router answered already): [`super::BodyAck`].
    pub const HTTP_ACK: &str = "http_ack";
    /// Asks for an exchange's answer (since 1.3): [`super::NextPiece`] →
    /// the head ([`HTTP_ANSWER`]) for piece 0, else the answer's next
    /// piece ([`HTTP_BODY`]).
    pub const HTTP_NEXT: &str = "http_next";
}

/// One message between nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Frame<B> {
    /// The sender's wire version.
    pub version: Version,
    /// What the body is (see [`kind`]).
    pub kind: String,
    /// The message's id: a delivery's envelope id, echoed by its ack.
    pub id: String,
    /// The body, typed by `kind`.
    pub body: B,
}

/// A frame's head, read before its body.
#[derive(Debug, Deserialize)]
struct Head {
    version: Version,
    kind: String,
    id: String,
}

/// A node asking another who it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelloRequest {
    /// The cluster the asking node belongs to.
    pub cluster: String,
    /// The asking node's name.
    pub node: String,
}

/// Who a node is: its name, where it listens, and the bots it hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Its cluster.
    pub cluster: String,
    /// Its name, unique in the cluster.
    pub node: String,
    /// Where its node server listens (`HOST:PORT`), to connect again.
    pub listen: String,
    /// The bots it hosts.
    pub bots: Vec<HostedBot>,
    /// The houses it hosts (since 1.1; none from an older node).
    #[serde(default)]
    pub houses: Vec<HostedHouse>,
    /// Where its HTTP API listens (`http://HOST:PORT`), when it serves one
    /// (since 1.1).
    #[serde(default)]
    pub http: Option<String>,
    /// The actor kinds a program registered on it (since 1.4; none from an
    /// older node).
    #[serde(default)]
    pub kinds: Vec<String>,
}

/// A house a node hosts (its data lives in that node's store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostedHouse {
    /// Its name, unique in the cluster.
    pub name: String,
    /// Its id.
    pub id: HouseId,
}

/// The houses a node hosts now: every one, replacing what it said before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Houses {
    /// The node.
    pub node: String,
    /// Its houses.
    pub houses: Vec<HostedHouse>,
    /// Where its HTTP API listens, when it serves one.
    #[serde(default)]
    pub http: Option<String>,
}

/// The actor kinds a node's program registered now: every one, replacing
/// what it said before (since 1.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kinds {
    /// The node.
    pub node: String,
    /// Its kinds' names.
    pub kinds: Vec<String>,
}

/// Asks the receiving node to make a house and host it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HouseCreate {
    /// The asking node.
    pub from_node: String,
    /// The house's name.
    pub name: String,
}

/// What came of a [`HouseCreate`]: the house, committed before this
/// answer, or why not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HouseMade {
    /// The house made.
    pub house: Option<HostedHouse>,
    /// Why it was not: the name is taken (`conflict`) or refused (`refused`).
    #[serde(default)]
    pub code: String,
    /// What was wrong and what to do.
    #[serde(default)]
    pub message: String,
}

/// An HTTP request made to one node for a house another node hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpRequest {
    /// Its method (`GET`, `POST`, …).
    pub method: String,
    /// Its path and query, as sent (`/api/houses/acme/threads?limit=5`).
    pub uri: String,
    /// The headers the API reads (authorization, content type, accept).
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: Bytes,
    /// It came over the forwarding node's owner socket: the cluster's
    /// nodes trust each other (the cookie), so it acts as the owner here.
    #[serde(default)]
    pub owner: bool,
    /// The sender takes an answer over one frame in pieces (since 1.3):
    /// the answer says `more`, and the rest is asked for with `http_next`.
    #[serde(default)]
    pub pieces: bool,
}

/// The answer to an [`HttpRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpResponse {
    /// Its status.
    pub status: u16,
    /// Its headers (content type, retry-after).
    pub headers: Vec<(String, String)>,
    /// Its body, or the body's first piece when `more`.
    pub body: Bytes,
    /// The body continues: its pieces are asked for with `http_next`
    /// frames of this exchange's id (since 1.3; only when asked `pieces`).
    #[serde(default)]
    pub more: bool,
}

/// A piece of a body carried in several frames.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodyPiece {
    /// Its place: 1 for the piece after the first frame's, then 2, 3, …
    pub seq: u64,
    /// Its bytes.
    pub data: Bytes,
    /// It is the body's last piece.
    #[serde(default)]
    pub last: bool,
}

/// The answer to a request's [`BodyPiece`] (or to [`kind::HTTP_OPEN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BodyAck {
    /// False when the receiver reads no more of the body (its router
    /// answered without it): the sender stops and asks for the answer.
    pub open: bool,
}

/// Asks for piece `seq` of an exchange's answer: 0 is its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextPiece {
    /// The piece asked for.
    pub seq: u64,
}

/// Opens a WebSocket stream on the node that hosts its house.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamOpen {
    /// The node the client is connected to, where the stream's frames go.
    pub from_node: String,
    /// The upgrade request as the client made it (a `GET`, no body).
    pub request: HttpRequest,
}

/// The stream was upgraded by the receiving node's router.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamAccepted {}

/// One WebSocket message of a stream (pings and pongs stay on their hop).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamMessage {
    /// A binary message; else a text message, its bytes UTF-8.
    #[serde(default)]
    pub binary: bool,
    /// Its payload.
    pub data: Bytes,
}

/// Messages of a stream, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamData {
    /// The messages.
    pub messages: Vec<StreamMessage>,
}

/// A side of a stream closed it: its WebSocket close code and reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamClose {
    /// The close code (1000 normal, 1001 going away, …).
    pub code: u16,
    /// Why, for a person (a WebSocket close reason holds 123 bytes).
    #[serde(default)]
    pub reason: String,
}

/// The answer to [`StreamData`] and [`StreamClose`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamAck {
    /// False when the stream is not open at the receiver (closed, or
    /// dropped): the sender ends its side.
    pub open: bool,
}

#[path = "wire_moves.rs"]
mod moves;
pub use moves::{HouseMoveCommit, HouseMoveDone, HouseMovePart, HouseMoveRefuse};

/// Bytes, as MessagePack's `bin` (not an array of numbers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Bytes;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Bytes, E> {
                Ok(Bytes(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Bytes, E> {
                Ok(Bytes(v.as_bytes().to_vec()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Bytes, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(Bytes(out))
            }
        }
        d.deserialize_byte_buf(Visit)
    }
}

/// A bot a node hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostedBot {
    /// The bot's name.
    pub name: String,
    /// Its id.
    pub id: BotId,
    /// What it is for (its roster line).
    #[serde(default)]
    pub description: String,
}

/// A durable message handed to the node that hosts its receiver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// The sending node: where the answer to `envelope.from` goes.
    pub from_node: String,
    /// The message.
    pub envelope: Envelope,
}

/// The receiver's word that a delivery is committed in its store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ack {
    /// False when it had been committed before (a retry): not applied twice.
    pub first: bool,
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// What was wrong and what to do.
    pub reason: String,
}

/// What was wrong with a frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// Larger than [`MAX_FRAME`].
    #[error(
        "a frame of {size} bytes is over the limit of {MAX_FRAME} bytes; send smaller messages"
    )]
    TooLarge {
        /// Its size.
        size: usize,
    },
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("a frame nests maps and arrays deeper than {MAX_DEPTH} levels; it was not decoded")]
    TooDeep,
    /// Not well-formed MessagePack.
    #[error("a frame is not well-formed MessagePack ({0}); is the peer a troupe node?")]
    Malformed(String),
    /// Another major version.
    #[error(
        "the peer speaks wire version {theirs}, this node {ours}: nodes of one cluster must \
         share the major version; upgrade the older node"
    )]
    Version {
        /// The peer's.
        theirs: Version,
        /// Ours.
        ours: Version,
    },
    /// Not the kind asked for.
    #[error("expected a frame of kind `{expected}`, got `{got}`")]
    Kind {
        /// The kind expected.
        expected: String,
        /// The kind received.
        got: String,
    },
    /// Could not be encoded.
    #[error("a frame could not be encoded: {0}")]
    Encode(String),
}

/// Encodes a frame of `kind` with `id` and `body` at [`VERSION`].
pub fn encode<B: Serialize>(kind: &str, id: &str, body: &B) -> Result<Vec<u8>, WireError> {
    let frame = Frame {
        version: VERSION,
        kind: kind.to_string(),
        id: id.to_string(),
        body,
    };
    let bytes = rmp_serde::to_vec_named(&frame).map_err(|e| WireError::Encode(e.to_string()))?;
    if bytes.len() > MAX_FRAME {
        return Err(WireError::TooLarge { size: bytes.len() });
    }
    Ok(bytes)
}

/// The kind and id of a frame from another node, after its checks.
pub fn head(bytes: &[u8]) -> Result<(String, String), WireError> {
    check(bytes)?;
    let head: Head =
        rmp_serde::from_slice(bytes).map_err(|e| WireError::Malformed(e.to_string()))?;
    if head.version.major != VERSION.major {
        return Err(WireError::Version {
            theirs: head.version,
            ours: VERSION,
        });
    }
    Ok((head.kind, head.id))
}

/// Decodes a frame of `kind` from another node: size and nesting checked
/// first, then the version, then the body. Fields this build does not know
/// (a newer minor version's) are ignored.
pub fn decode<B: DeserializeOwned>(bytes: &[u8], kind: &str) -> Result<Frame<B>, WireError> {
    let (got, _) = head(bytes)?;
    if got != kind {
        return Err(WireError::Kind {
            expected: kind.to_string(),
            got,
        });
    }
    rmp_serde::from_slice(bytes).map_err(|e| WireError::Malformed(e.to_string()))
}

/// Checks `bytes` before decoding: at most [`MAX_FRAME`] long, one
/// well-formed MessagePack value whose maps and arrays nest at most
/// [`MAX_DEPTH`] deep. Walks without recursion.
pub fn check(bytes: &[u8]) -> Result<(), WireError> {
    if bytes.len() > MAX_FRAME {
        return Err(WireError::TooLarge { size: bytes.len() });
    }
    let truncated = || WireError::Malformed("truncated".into());
    // Values still expected at each open level; the first is the root.
    let mut open: Vec<u64> = vec![1];
    let mut pos = 0usize;
    while let Some(left) = open.last_mut() {
        if *left == 0 {
            open.pop();
            continue;
        }
        *left -= 1;
        let marker = *bytes.get(pos).ok_or_else(truncated)?;
        pos += 1;
        let read = |pos: usize, n: usize| -> Result<u64, WireError> {
            let b = bytes.get(pos..pos + n).ok_or_else(truncated)?;
            Ok(b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)))
        };
        // (bytes to skip after the marker, items of a container)
        let (skip, items): (u64, u64) = match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0),
            0x80..=0x8f => (0, 2 * u64::from(marker & 0x0f)),
            0x90..=0x9f => (0, u64::from(marker & 0x0f)),
            0xa0..=0xbf => (u64::from(marker & 0x1f), 0),
            0xc4 | 0xd9 => (1 + read(pos, 1)?, 0),
            0xc5 | 0xda => (2 + read(pos, 2)?, 0),
            0xc6 | 0xdb => (4 + read(pos, 4)?, 0),
            0xc7 => (2 + read(pos, 1)?, 0),
            0xc8 => (3 + read(pos, 2)?, 0),
            0xc9 => (5 + read(pos, 4)?, 0),
            0xca => (4, 0),
            0xcb => (8, 0),
            0xcc | 0xd0 => (1, 0),
            0xcd | 0xd1 => (2, 0),
            0xce | 0xd2 => (4, 0),
            0xcf | 0xd3 => (8, 0),
            0xd4 => (2, 0),
            0xd5 => (3, 0),
            0xd6 => (5, 0),
            0xd7 => (9, 0),
            0xd8 => (17, 0),
            0xdc => (2, read(pos, 2)?),
            0xdd => (4, read(pos, 4)?),
            0xde => (2, 2 * read(pos, 2)?),
            0xdf => (4, 2 * read(pos, 4)?),
            0xc1 => return Err(WireError::Malformed("marker 0xc1 is never used".into())),
        };
        let skip = usize::try_from(skip).map_err(|_| truncated())?;
        pos = pos.checked_add(skip).ok_or_else(truncated)?;
        if pos > bytes.len() {
            return Err(truncated());
        }
        if items > 0 {
            // Each item takes at least a byte: a count beyond what is left
            // is a lie, refused before anything is allocated for it.
            if items > (bytes.len() - pos) as u64 {
                return Err(truncated());
            }
            open.push(items);
            if open.len() - 1 > MAX_DEPTH {
                return Err(WireError::TooDeep);
            }
        }
    }
    if pos != bytes.len() {
        return Err(WireError::Malformed(format!(
            "{} bytes after the frame",
            bytes.len() - pos
        )));
    }
    Ok(())
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
