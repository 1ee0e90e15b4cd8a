//! A daemon with a tool of your own: the built-ins, the `[[tools.command]]` tools of the
//! config, and `get_weather` below.
//!
//! ```sh
//! cargo run --example custom_tool -- callbackd.toml           # serve
//! cargo run --example custom_tool -- callbackd.toml export    # print customTools JSON
//! ```

use callbackd::tools::{BoxFuture, Tool, ToolContext, ToolError};
use callbackd::{App, Config};
use serde_json::{json, Value};

struct Weather;

impl Tool for Weather {
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "Current temperature in a city"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    }
    fn call(&self, args: Value, _ctx: ToolContext) -> BoxFuture<'_, Result<Value, ToolError>> {
        Box::pin(async move { Ok(json!({"city": args["city"], "tempC": 21})) })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = Config::load(args.first().map(std::path::Path::new))?;
    callbackd::telemetry::init(&config.log);
    let daemon = App::builder(config).tool(Weather);
    if args.get(1).is_some_and(|a| a == "export") {
        println!("{:#}", daemon.tool_declarations()?);
        return Ok(());
    }
    // Listening for SIGTERM/SIGINT before the start: an early stop is a clean one.
    let shutdown = callbackd::shutdown::install()?;
    let app = daemon.build().await?;
    eprintln!("callbackd with get_weather on {}", app.base_url());
    app.run_until(shutdown).await
}
