//! MCP: the user's Model Context Protocol servers, as troupe sees them.
//!
//! [`config`] reads the home's `mcp.json`; [`client`] connects to one server
//! over stdio or streamable HTTP with the official SDK (`rmcp`) and turns its
//! tools and results into troupe's. Supervising the connections (lazy start,
//! restarts, the tool list) is the actors' job (`troupe_actors::mcp`).

pub mod client;
pub mod config;
pub mod result;

pub use config::{McpConfig, McpConfigError, ServerConfig, ServerTrust, Transport};
