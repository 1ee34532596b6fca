//! The integration suite's modules.

mod agents;
mod background;
mod carried;
mod chat;
mod cli;
mod crash;
mod docs;
mod environments;
mod home;
mod house;
mod house_cli;
mod house_files;
mod limits;
mod mcp;
mod review;
mod routines;
mod run;
mod sandbox_escape;
mod security;
mod server;
mod smoke;
mod supervision;
mod support;
mod turn_loop;
mod vision;
mod web_page;
