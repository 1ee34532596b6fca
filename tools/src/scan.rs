//! The threat scanner for text that is kept and later read back as
//! instructions: memory entries, skills, routine prompts.
//!
//! What an agent writes to memory or a skill reaches every later conversation's
//! system prompt, so a page the agent read once could plant standing
//! instructions there. The scanner refuses the known shapes of that: prompt
//! injection, role hijack, exfiltration of secrets, credential or SSH-key
//! planting, and invisible characters that hide text from the person reading
//! the file. Patterns run on the NFKC normalization of the text, lowercased,
//! so look-alike forms (fullwidth letters, ligatures) are caught too; the
//! invisible characters are looked for both before and after normalization.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

/// The family a threat belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreatFamily {
    /// Instructions to ignore or replace the previous or system rules.
    PromptInjection,
    /// An attempt to give the agent another identity ("you are now …").
    RoleHijack,
    /// Sending secrets, environment or keys somewhere.
    Exfiltration,
    /// Planting credentials or SSH keys (authorized_keys, private keys, API keys).
    CredentialPlanting,
    /// Characters that do not show: zero-width, bidi controls, tag characters.
    InvisibleCharacters,
}

impl ThreatFamily {
    /// The family's name as messages say it.
    pub fn label(self) -> &'static str {
        match self {
            Self::PromptInjection => "prompt injection",
            Self::RoleHijack => "role hijack",
            Self::Exfiltration => "exfiltration",
            Self::CredentialPlanting => "credential planting",
            Self::InvisibleCharacters => "invisible characters",
        }
    }
}

impl fmt::Display for ThreatFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// One threat found in a text: its family and what matched, described (the
/// matched text itself is not repeated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Threat {
    /// The family.
    pub family: ThreatFamily,
    /// What was found, in a few words.
    pub detail: String,
}

impl fmt::Display for Threat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.family, self.detail)
    }
}

/// The classes of invisible characters, by code point range.
const INVISIBLE: &[(u32, u32, &str)] = &[
    (0x200B, 0x200D, "zero-width character"),
    (0x2060, 0x2060, "word joiner"),
    (0xFEFF, 0xFEFF, "zero-width no-break space (BOM)"),
    (0x202A, 0x202E, "bidirectional control"),
    (0x2066, 0x2069, "bidirectional isolate"),
    (0xE0000, 0xE007F, "tag character"),
];

/// The patterns, on the normalized lowercase text: family, description, regex.
const PATTERNS: &[(ThreatFamily, &str, &str)] = &[
    (
        ThreatFamily::PromptInjection,
        "instructions to ignore earlier or system rules",
        r"\b(ignore|disregard|forget|override|bypass|skip)\s+((all|any|every|the|your|my|of|these|those)\s+)*(previous|prior|above|earlier|preceding|system|developer|original|existing)\s+(instructions?|rules|prompts?|directions|directives|guidelines|messages|context|constraints)",
    ),
    (
        ThreatFamily::PromptInjection,
        "a replacement system prompt",
        r"\b(new|updated|real|actual)\s+system\s+(prompt|instructions?)\s*:",
    ),
    (
        ThreatFamily::PromptInjection,
        "a forged system or developer tag",
        r"<\s*/?\s*(system|developer|system_prompt)\s*>|\[\s*(system|inst)\s*\]",
    ),
    (
        ThreatFamily::PromptInjection,
        "instructions to hide actions from the user",
        r"\b(do\s+not|don't|never)\s+(tell|inform|mention\s+(this\s+)?to|reveal\s+(this\s+)?to|let)\s+the\s+user\b",
    ),
    (
        ThreatFamily::RoleHijack,
        "\"you are now\"",
        r"\byou\s+are\s+now\b",
    ),
    (
        ThreatFamily::RoleHijack,
        "a new identity from now on",
        r"\bfrom\s+now\s+on,?\s+you\s+(are|will\s+be|must\s+act|will\s+act|act)\b",
    ),
    (
        ThreatFamily::RoleHijack,
        "an unrestricted persona",
        r"\b(act|behave|respond)\s+as\s+(an?\s+)?(unrestricted|unfiltered|jailbroken|uncensored)\b|\b(dan|developer|god)\s+mode\s+(enabled|on|activated)\b|\bpretend\s+(to\s+be|you\s+are)\s+(an?\s+)?(unrestricted|unfiltered|different\s+ai|another\s+ai)",
    ),
    (
        ThreatFamily::Exfiltration,
        "sending secrets to an address",
        r"\b(send|post|upload|exfiltrate|transmit|leak|forward|copy|email)\b[^\n]{0,100}\b(secrets?|env\b|environment\s+variables?|\.env\b|api[\s_-]?keys?|tokens?|passwords?|credentials?|ssh\s+keys?|private\s+keys?|id_rsa|id_ed25519|\.ssh\b|cookies?)[^\n]{0,100}(https?://|\bto\s+[a-z0-9-]+(\.[a-z0-9-]+)+)",
    ),
    (
        ThreatFamily::Exfiltration,
        "a web request carrying a secret variable",
        r"\b(curl|wget|invoke-webrequest|iwr|nc|ncat)\b[^\n]*\$\{?[a-z0-9_]*(key|token|secret|pass|auth|cred)",
    ),
    (
        ThreatFamily::Exfiltration,
        "a web request carrying key or environment files",
        r"\b(curl|wget|nc|ncat)\b[^\n]*(\.env\b|\.ssh/|id_rsa|id_ed25519|/etc/passwd|/etc/shadow|printenv|\benv\s*\|)|(\.env\b|\.ssh/|id_rsa|id_ed25519|printenv|\benv)\b[^\n]*\|\s*(curl|wget|nc|ncat)\b",
    ),
    (
        ThreatFamily::CredentialPlanting,
        "an authorized_keys entry",
        r"authorized_keys",
    ),
    (
        ThreatFamily::CredentialPlanting,
        "a private key",
        r"-----\s*begin\s+([a-z0-9]+\s+)*private\s+key\s*-----",
    ),
    (
        ThreatFamily::CredentialPlanting,
        "an SSH public key",
        r"\b(ssh-(rsa|ed25519|dss)|ecdsa-sha2-nistp\d+)\s+aaaa[0-9a-z+/=]{20,}",
    ),
    (
        ThreatFamily::CredentialPlanting,
        "an API key or token",
        r"\b(sk-(ant-|proj-)?[a-z0-9_-]{20,}|gh[pousr]_[a-z0-9]{30,}|github_pat_[a-z0-9_]{20,}|akia[0-9a-z]{16}|xox[abprs]-[a-z0-9-]{10,}|aiza[0-9a-z_-]{35}|glpat-[a-z0-9_-]{20})",
    ),
];

static COMPILED: LazyLock<Vec<(ThreatFamily, &'static str, Regex)>> = LazyLock::new(|| {
    PATTERNS
        .iter()
        .filter_map(|&(family, detail, pattern)| match Regex::new(pattern) {
            Ok(re) => Some((family, detail, re)),
            Err(e) => {
                tracing::error!(detail, error = %e, "a threat pattern does not compile");
                None
            }
        })
        .collect()
});

/// The invisible-character class of `c`, if it is one.
pub fn invisible_class(c: char) -> Option<&'static str> {
    let cp = u32::from(c);
    INVISIBLE
        .iter()
        .find(|(lo, hi, _)| (*lo..=*hi).contains(&cp))
        .map(|(_, _, class)| *class)
}

/// Every threat in `text`, one per pattern or invisible class, in a stable
/// order (invisible characters first, then the patterns in table order).
pub fn scan_all(text: &str) -> Vec<Threat> {
    let normalized: String = text.nfkc().collect();
    let mut threats: Vec<Threat> = Vec::new();
    for c in text.chars().chain(normalized.chars()) {
        if let Some(class) = invisible_class(c) {
            let detail = format!("{class} U+{:04X}", u32::from(c));
            if !threats.iter().any(|t| t.detail == detail) {
                threats.push(Threat {
                    family: ThreatFamily::InvisibleCharacters,
                    detail,
                });
            }
        }
    }
    // Patterns see the text with invisible characters taken out, so that one
    // hidden inside a word does not also hide the word.
    let visible: String = normalized
        .chars()
        .filter(|c| invisible_class(*c).is_none())
        .collect::<String>()
        .to_lowercase();
    for (family, detail, re) in COMPILED.iter() {
        if re.is_match(&visible) {
            threats.push(Threat {
                family: *family,
                detail: (*detail).to_string(),
            });
        }
    }
    threats
}

/// The first threat in `text`, or `None` when it is clean.
pub fn scan(text: &str) -> Option<Threat> {
    scan_all(text).into_iter().next()
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
