//! Which models see images, and the image a tool result carries.
//!
//! `read_file` attaches an image (base64, with its media type) to its result
//! only for a model that sees images; the clients then send it as an image
//! part — OpenAI's `image_url` with a data URL, Anthropic's `image` block
//! with a base64 source. Whether a model sees images comes from its
//! `models.toml` entry (`sees_images = true` or `false`) or, when that says
//! nothing, from [`known_to_see_images`]: a list of model families known to
//! take image input. A model not on it is treated as text-only and gets the
//! text fallback, which is always safe.

use crate::protocol::ToolResult;

/// Name prefixes of model families that take images (compared with the part
/// of the name after the last `/`, lower-cased).
const SEEING_PREFIXES: &[&str] = &[
    "gpt-4o",
    "chatgpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-4-turbo",
    "gpt-4-vision",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "claude-3",
    "claude-sonnet-4",
    "claude-opus-4",
    "claude-haiku-4",
    "claude-4",
    "gemini",
    "gemma3",
    "gemma-3",
    "llava",
    "bakllava",
    "moondream",
    "minicpm-v",
    "pixtral",
    "llama-4",
    "llama4",
    "mistral-small3.1",
    "mistral-small-3.1",
    "mistral-medium-3",
    "grok-4",
];

/// Name fragments that mark a vision variant of any family.
const SEEING_MARKS: &[&str] = &["vision", "-vl", "vl:", "vl-"];

/// Names that match a prefix above but take text only.
const TEXT_ONLY: &[&str] = &["o1-mini", "o1-preview", "o3-mini"];

/// Whether the model named `model` is known to take images.
///
/// ```
/// use troupe_runtime::model::vision::known_to_see_images;
/// assert!(known_to_see_images("gpt-4o-mini"));
/// assert!(known_to_see_images("anthropic/claude-sonnet-4-5"));
/// assert!(known_to_see_images("qwen2.5vl:7b"));
/// assert!(!known_to_see_images("qwen3:8b"));
/// assert!(!known_to_see_images("o3-mini"));
/// ```
pub fn known_to_see_images(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    if TEXT_ONLY.iter().any(|t| name.starts_with(t)) {
        return false;
    }
    SEEING_PREFIXES.iter().any(|p| name.starts_with(p))
        || SEEING_MARKS.iter().any(|m| name.contains(m))
        || name.ends_with("vl")
}

/// An image a tool result carries for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image<'a> {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: &'a str,
    /// The bytes, base64-encoded.
    pub base64: &'a str,
}

impl Image<'_> {
    /// The image as a `data:` URL.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.base64)
    }
}

/// The image in `result`'s data (`{"image": {"media_type", "bytes"}}`, as
/// `read_file` gives it), if it carries one.
pub fn image_of(result: &ToolResult) -> Option<Image<'_>> {
    let image = result.data.get("image")?;
    Some(Image {
        media_type: image.get("media_type")?.as_str()?,
        base64: image.get("bytes")?.as_str().filter(|b| !b.is_empty())?,
    })
}

/// What replaces an attached image for a model that cannot see it (a
/// conversation whose model changed after the image was read).
pub const NOT_SHOWN: &str =
    "[the image is not shown: this model does not take images; ask the user what it shows if that matters]";

#[cfg(test)]
#[path = "vision_tests.rs"]
mod bodies;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_families_see_images_and_text_models_do_not() {
        for model in [
            "gpt-4o",
            "gpt-4.1-mini",
            "gpt-5",
            "o4-mini",
            "claude-3-5-sonnet-latest",
            "claude-opus-4-1",
            "gemini-2.5-pro",
            "llava:13b",
            "llama3.2-vision",
            "Qwen/Qwen2.5-VL-7B-Instruct",
            "gemma3:12b",
        ] {
            assert!(known_to_see_images(model), "{model}");
        }
        for model in [
            "gpt-3.5-turbo",
            "gpt-4",
            "o1-mini",
            "o3-mini",
            "qwen3:8b",
            "llama3.1:8b",
            "deepseek-r1",
            "mistral",
        ] {
            assert!(!known_to_see_images(model), "{model}");
        }
    }

    #[test]
    fn an_image_is_found_only_with_its_bytes() {
        let shown = ToolResult::ok_with(
            "a PNG",
            json!({"image": {"media_type": "image/png", "path": "/x.png", "bytes": "iVBO"}}),
        );
        let image = image_of(&shown).unwrap();
        assert_eq!(image.data_url(), "data:image/png;base64,iVBO");
        let withheld = ToolResult::ok_with(
            "a PNG",
            json!({"image": {"media_type": "image/png", "path": "/x.png"}}),
        );
        assert_eq!(image_of(&withheld), None);
        assert_eq!(image_of(&ToolResult::ok("text")), None);
    }
}
