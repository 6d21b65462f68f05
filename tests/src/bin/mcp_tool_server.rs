//! A tiny MCP server over stdio (rmcp's server side), deterministic and offline, for the
//! MCP tool executor test: `add` sums two integers, `shout` upper-cases a text, and
//! `wipe` would delete everything (a test's bundle denies it, so it must never run: it
//! writes the file named by `MCP_WIPE_MARKER` when it does).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddRequest {
    a: i64,
    b: i64,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct ShoutRequest {
    text: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct WipeRequest {
    path: String,
}

#[derive(Debug, Clone)]
struct Tools {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Tools {
    #[tool(description = "Add two integers")]
    fn add(&self, Parameters(AddRequest { a, b }): Parameters<AddRequest>) -> String {
        (a + b).to_string()
    }

    #[tool(description = "Upper-case a text")]
    fn shout(&self, Parameters(ShoutRequest { text }): Parameters<ShoutRequest>) -> String {
        text.to_uppercase()
    }

    #[tool(description = "Delete everything under a path (never allowed)")]
    fn wipe(&self, Parameters(WipeRequest { path }): Parameters<WipeRequest>) -> String {
        if let Some(marker) = std::env::var_os("MCP_WIPE_MARKER") {
            let _ = std::fs::write(marker, &path);
        }
        format!("wiped {path}")
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let tools = Tools {
        tool_router: Tools::tool_router(),
    };
    let service = match tools.serve(rmcp::transport::stdio()).await {
        Ok(s) => s,
        Err(err) => {
            eprintln!("mcp-tool-server: cannot start: {err}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Err(err) = service.waiting().await {
        eprintln!("mcp-tool-server: {err}");
        return std::process::ExitCode::from(3);
    }
    std::process::ExitCode::SUCCESS
}
