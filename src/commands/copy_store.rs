//! `callbackd copy-store`: every row from one store to another (see `store::transfer`).

pub async fn run(args: callbackd::cli::CopyStoreArgs) -> anyhow::Result<()> {
    use callbackd::store::{backend, transfer};
    let mut from = backend::transfer_side(&args.from, args.from_schema, false).await?;
    let mut to = backend::transfer_side(&args.to, args.to_schema, true).await?;
    let report = transfer::copy_store(from.as_mut(), to.as_mut(), args.batch).await?;
    let rows: Vec<String> = report
        .rows
        .iter()
        .map(|(t, n)| format!("{n} {t}"))
        .collect();
    println!(
        "copied {} from {} to {}: {}; counts match, {} checkpoint blobs verified",
        if rows.is_empty() {
            "nothing".to_string()
        } else {
            "everything".to_string()
        },
        from.describe(),
        to.describe(),
        rows.join(", "),
        report.blobs_verified
    );
    Ok(())
}
