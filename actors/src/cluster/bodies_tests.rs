use futures::StreamExt;
use pretty_assertions::assert_eq;

use super::*;

fn chunks(parts: &[&[u8]]) -> BodyStream {
    let parts: Vec<Result<Bytes, String>> = parts
        .iter()
        .map(|p| Ok(Bytes::copy_from_slice(p)))
        .collect();
    futures::stream::iter(parts).boxed()
}

#[tokio::test]
async fn a_body_is_read_in_pieces_the_last_one_said() {
    let mut body = Reader::new(chunks(&[b"abc", b"defgh", b"", b"ij"]));
    assert_eq!(body.take(4).await.unwrap(), (b"abcd".to_vec(), false));
    assert_eq!(body.take(4).await.unwrap(), (b"efgh".to_vec(), false));
    assert_eq!(body.take(4).await.unwrap(), (b"ij".to_vec(), true));

    // Exactly one piece long: the piece is the last, no empty one after it.
    let mut body = Reader::new(chunks(&[b"abcd"]));
    assert_eq!(body.take(4).await.unwrap(), (b"abcd".to_vec(), true));
    let mut body = Reader::new(chunks(&[]));
    assert_eq!(body.take(4).await.unwrap(), (Vec::new(), true));
}

#[tokio::test]
async fn a_request_body_cut_short_between_nodes_is_an_error_not_a_shorter_body() {
    let (pieces, fed_by) = mpsc::channel(QUEUE);
    let mut body = fed(b"first".to_vec(), fed_by);
    pieces.send((b"second".to_vec(), false)).await.unwrap();
    drop(pieces);
    assert_eq!(body.next().await, Some(Ok(Bytes::from_static(b"first"))));
    assert_eq!(body.next().await, Some(Ok(Bytes::from_static(b"second"))));
    assert!(matches!(body.next().await, Some(Err(e)) if e.contains("cut short")));
    assert_eq!(body.next().await, None);

    let (pieces, fed_by) = mpsc::channel(QUEUE);
    let body = fed(b"first".to_vec(), fed_by);
    pieces.send((b"last".to_vec(), true)).await.unwrap();
    drop(pieces);
    let whole: Vec<Result<Bytes, String>> = body.collect().await;
    assert_eq!(
        whole,
        vec![
            Ok(Bytes::from_static(b"first")),
            Ok(Bytes::from_static(b"last"))
        ]
    );
}
