//! rtscope: how real-time is this Linux machine, under the load it will
//! really carry, and why not more? Exit codes: 0 ok, 1 error, 2 a
//! requirement or threshold failed.

mod cli;
mod commands;
mod disturb;
mod probe;
mod recorder;
mod report;
mod sys;

fn main() {
    let code = match commands::main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rtscope: error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}
