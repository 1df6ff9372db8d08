//! `cmd:'COMMAND'`: any command, through `/bin/sh -c`, started again
//! whenever it ends, in as many copies as the intensity says.

use super::{Intensity, LoadSpec, Running, Workload, quiet_command, supervise};
use anyhow::Result;

pub struct Cmd;

impl Workload for Cmd {
    fn name(&self) -> &'static str {
        "cmd"
    }
    fn about(&self) -> &'static str {
        "any command (cmd:'make -j2'), run by /bin/sh -c and restarted when it exits; intensity: copies (1)"
    }
    fn intensity(&self) -> Option<Intensity> {
        Some(Intensity { unit: "copies", min: 1, max: 256, default: |_| 1 })
    }
    fn takes_argument(&self) -> bool {
        true
    }
    fn commands(&self) -> bool {
        true
    }
    fn start(&self, spec: &LoadSpec, run: &mut Running) -> Result<()> {
        let command = spec.arg.clone().unwrap_or_default();
        let dir = std::env::current_dir().unwrap_or_else(|_| "/".into());
        for i in 0..spec.intensity {
            let (command, dir) = (command.clone(), dir.clone());
            run.spawn(&format!("cmd{i}"), &spec.cpus, move |ctx| {
                supervise(ctx, &format!("cmd:'{command}'"), true, || {
                    let mut c = quiet_command("/bin/sh");
                    c.arg("-c").arg(&command).current_dir(&dir);
                    c
                });
            })?;
        }
        Ok(())
    }
}
