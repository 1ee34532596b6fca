use pretty_assertions::assert_eq;
use serde::Serialize;

use super::*;
use crate::id::{ConversationId, MsgId};
use crate::protocol::{Address, Payload};

fn envelope() -> Envelope {
    Envelope {
        id: MsgId::new(),
        from: Address::Conversation(ConversationId::new()),
        to: Address::Bot(BotId::new()),
        body: Payload::Text {
            sender: "alice".into(),
            text: "how is the launch?".into(),
            expects_reply: true,
        },
        sent_at: chrono::Utc::now(),
    }
}

#[test]
fn a_delivery_round_trips() {
    let delivery = Delivery {
        from_node: "a".into(),
        envelope: envelope(),
    };
    let id = delivery.envelope.id.to_string();
    let bytes = encode(kind::ENVELOPE, &id, &delivery).unwrap();
    let frame: Frame<Delivery> = decode(&bytes, kind::ENVELOPE).unwrap();
    assert_eq!(frame.version, VERSION);
    assert_eq!(frame.id, id);
    assert_eq!(frame.body, delivery);
}

#[test]
fn a_newer_minor_version_with_an_added_field_decodes() {
    // What a node one minor version newer sends: a field in the frame and
    // one in the body that this build does not know.
    #[derive(Serialize)]
    struct NewerDelivery {
        from_node: String,
        envelope: Envelope,
        priority: u8,
    }
    #[derive(Serialize)]
    struct NewerFrame {
        version: Version,
        kind: String,
        id: String,
        body: NewerDelivery,
        trace: String,
    }
    let envelope = envelope();
    let bytes = rmp_serde::to_vec_named(&NewerFrame {
        version: Version {
            major: VERSION.major,
            minor: VERSION.minor + 1,
        },
        kind: kind::ENVELOPE.into(),
        id: envelope.id.to_string(),
        body: NewerDelivery {
            from_node: "b".into(),
            envelope: envelope.clone(),
            priority: 3,
        },
        trace: "00-abc".into(),
    })
    .unwrap();
    let frame: Frame<Delivery> = decode(&bytes, kind::ENVELOPE).unwrap();
    assert_eq!(frame.body.envelope, envelope);
    assert_eq!(frame.version.minor, VERSION.minor + 1);
}

#[test]
fn another_major_version_is_refused_with_what_to_do() {
    let bytes = rmp_serde::to_vec_named(&Frame {
        version: Version {
            major: VERSION.major + 1,
            minor: 0,
        },
        kind: kind::ACK.to_string(),
        id: "x".into(),
        body: Ack { first: true },
    })
    .unwrap();
    let err = decode::<Ack>(&bytes, kind::ACK).unwrap_err();
    assert!(matches!(err, WireError::Version { .. }), "{err}");
    assert!(err.to_string().contains("upgrade the older node"), "{err}");
}

#[test]
fn a_frame_over_the_size_limit_is_refused_before_decoding() {
    let bytes = vec![0xc0; MAX_FRAME + 1];
    assert_eq!(
        decode::<Ack>(&bytes, kind::ACK).unwrap_err(),
        WireError::TooLarge {
            size: MAX_FRAME + 1
        }
    );
}

#[test]
fn deep_nesting_is_refused_without_recursing() {
    // A million nested one-item arrays: decoding would overflow the stack.
    let mut bytes = vec![0x91; 1_000_000];
    bytes.push(0xc0);
    assert_eq!(check(&bytes).unwrap_err(), WireError::TooDeep);
    let mut fine = vec![0x91; MAX_DEPTH];
    fine.push(0xc0);
    assert_eq!(check(&fine), Ok(()));
}

#[test]
fn lying_lengths_and_trailing_bytes_are_malformed() {
    // An array that says it holds four billion items, in six bytes.
    let err = check(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0]).unwrap_err();
    assert!(matches!(err, WireError::Malformed(_)), "{err}");
    let err = check(&[0xc0, 0xc0]).unwrap_err();
    assert!(matches!(err, WireError::Malformed(_)), "{err}");
    let err = check(&[0xdb, 0xff, 0xff, 0xff]).unwrap_err();
    assert!(matches!(err, WireError::Malformed(_)), "{err}");
}

#[test]
fn the_wrong_kind_is_named() {
    let bytes = encode(kind::ACK, "x", &Ack { first: false }).unwrap();
    let err = decode::<Delivery>(&bytes, kind::ENVELOPE).unwrap_err();
    assert_eq!(
        err,
        WireError::Kind {
            expected: "envelope".into(),
            got: "ack".into()
        }
    );
}

#[test]
fn an_older_nodes_hello_without_houses_is_read_with_none() {
    #[derive(serde::Serialize)]
    struct OldHello {
        cluster: String,
        node: String,
        listen: String,
        bots: Vec<HostedBot>,
    }
    let bytes = encode(
        kind::HELLO,
        "hello",
        &OldHello {
            cluster: "c".into(),
            node: "b".into(),
            listen: "127.0.0.1:1".into(),
            bots: vec![],
        },
    )
    .unwrap();
    let hello: Hello = decode(&bytes, kind::HELLO).unwrap().body;
    assert_eq!(hello.houses, vec![]);
    assert_eq!(hello.http, None);
}

#[test]
fn an_http_body_travels_as_bytes_and_comes_back_whole() {
    let body: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    let asked = HttpRequest {
        method: "PUT".into(),
        uri: "/api/houses/acme/files/a.bin".into(),
        headers: vec![("authorization".into(), "Bearer x".into())],
        body: Bytes(body.clone()),
        owner: false,
        pieces: true,
    };
    let bytes = encode(kind::HTTP, "r", &asked).unwrap();
    // One `bin`, not an array of numbers: barely more than the body.
    assert!(bytes.len() < body.len() + 200, "{}", bytes.len());
    let got: HttpRequest = decode(&bytes, kind::HTTP).unwrap().body;
    assert_eq!(got, asked);
}

#[test]
fn a_streams_frames_round_trip_and_a_message_travels_as_bytes() {
    let open = StreamOpen {
        from_node: "a".into(),
        request: HttpRequest {
            method: "GET".into(),
            uri: "/api/houses/acme/threads/launch/events?after=3".into(),
            headers: vec![("authorization".into(), "Bearer x".into())],
            body: Bytes::default(),
            owner: false,
            pieces: false,
        },
    };
    let bytes = encode(kind::STREAM_OPEN, "a.1", &open).unwrap();
    let frame: Frame<StreamOpen> = decode(&bytes, kind::STREAM_OPEN).unwrap();
    assert_eq!((frame.id.as_str(), frame.body), ("a.1", open));

    let text = "x".repeat(10_000);
    let data = StreamData {
        messages: vec![
            StreamMessage {
                binary: false,
                data: Bytes(text.clone().into_bytes()),
            },
            StreamMessage {
                binary: true,
                data: Bytes(vec![0, 255]),
            },
        ],
    };
    let bytes = encode(kind::STREAM_DATA, "a.1", &data).unwrap();
    assert!(bytes.len() < text.len() + 100, "{}", bytes.len());
    assert_eq!(
        decode::<StreamData>(&bytes, kind::STREAM_DATA)
            .unwrap()
            .body,
        data
    );

    let close = StreamClose {
        code: 1001,
        reason: "node `c` is down".into(),
    };
    let bytes = encode(kind::STREAM_CLOSE, "a.1", &close).unwrap();
    assert_eq!(
        decode::<StreamClose>(&bytes, kind::STREAM_CLOSE)
            .unwrap()
            .body,
        close
    );
    let bytes = encode(kind::STREAM_ACK, "a.1", &StreamAck { open: false }).unwrap();
    assert_eq!(
        decode::<StreamAck>(&bytes, kind::STREAM_ACK).unwrap().body,
        StreamAck { open: false }
    );
}

#[test]
fn a_request_of_wire_1_2_takes_its_answer_in_one_frame() {
    // A node of 1.2 knows neither `pieces` nor `more`: both read false.
    #[derive(Serialize)]
    struct Old {
        method: &'static str,
        uri: &'static str,
        headers: Vec<(String, String)>,
        body: Bytes,
        owner: bool,
    }
    let old = Old {
        method: "GET",
        uri: "/api/houses/acme/files/a.bin",
        headers: vec![],
        body: Bytes::default(),
        owner: false,
    };
    let bytes = encode(kind::HTTP, "r", &old).unwrap();
    let got: HttpRequest = decode(&bytes, kind::HTTP).unwrap().body;
    assert!(!got.pieces);
}

#[test]
fn a_bodys_pieces_and_their_acks_round_trip() {
    let piece = BodyPiece {
        seq: 3,
        data: Bytes(vec![7; 70_000]),
        last: true,
    };
    let bytes = encode(kind::HTTP_BODY, "a.9", &piece).unwrap();
    assert!(bytes.len() < 70_000 + 100, "{}", bytes.len());
    assert_eq!(
        decode::<BodyPiece>(&bytes, kind::HTTP_BODY).unwrap().body,
        piece
    );
    let bytes = encode(kind::HTTP_ACK, "a.9", &BodyAck { open: false }).unwrap();
    assert_eq!(
        decode::<BodyAck>(&bytes, kind::HTTP_ACK).unwrap().body,
        BodyAck { open: false }
    );
    let bytes = encode(kind::HTTP_NEXT, "a.9", &NextPiece { seq: 0 }).unwrap();
    assert_eq!(
        decode::<NextPiece>(&bytes, kind::HTTP_NEXT).unwrap().body,
        NextPiece { seq: 0 }
    );
}
