//! The schema migrations' names, in order, written once for both backends. Each backend
//! embeds its own SQL file of every name (`migrations/NAME.sql` for SQLite,
//! `migrations/postgres/NAME.sql`), so a new migration is one name here and one file per
//! backend; a name without its file fails the build.

/// `&[(name, sql)]` of every migration, the SQL read from `migrations/<dir>NAME.sql`.
macro_rules! migrations {
    ($dir:literal) => {
        $crate::store::sql::migrations!(@files $dir:
            "0001_init",
            "0002_run_api",
            "0003_approvals",
            "0004_approval_leases",
            "0005_run_inputs",
            "0006_forks",
            "0007_approval_confirm",
            "0008_see",
            "0009_ag_ui_threads",
            "0010_webhooks",
            "0011_tool_call_values",
        )
    };
    (@files $dir:literal: $($name:literal),* $(,)?) => {
        &[$((
            $name,
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/", $dir, $name, ".sql")),
        )),*]
    };
}
pub(crate) use migrations;
