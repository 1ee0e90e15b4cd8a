//! Compiles `proto/sdk/v1/*.proto` with protox (pure Rust), so building callbackd
//! never needs a `protoc` binary on the machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/sdk/v1/store_callback.proto",
        "proto/sdk/v1/custom_tool_callback.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    prost_build::Config::new()
        // Services are served by hand (Connect unary over axum); only messages are generated.
        .compile_fds(descriptors)?;
    Ok(())
}
