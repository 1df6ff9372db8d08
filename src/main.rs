//! rtscope: how real-time is this Linux machine, under the load it will
//! really carry, and why not more? Exit codes: 0 ok, 1 error, 2 a
//! requirement or threshold failed.

fn main() {
    let code = match rtscope::commands::main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rtscope: error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}
