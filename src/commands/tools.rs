//! `callbackd tools export`: the tool declarations a bridge's adapter passes to CreateAgent.

use callbackd::cli::ConfigArgs;
use callbackd::App;

use super::load;

pub fn export(args: &ConfigArgs) -> anyhow::Result<()> {
    let config = load(args)?;
    let declarations = App::builder(config).tool_declarations()?;
    println!("{}", serde_json::to_string_pretty(&declarations)?);
    Ok(())
}
