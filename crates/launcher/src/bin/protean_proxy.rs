//! `protean-proxy`: runs one host's ranks of a multi-host job for mpirun (see
//! `protean_launcher::proxy`). Started by mpirun through ssh, rsh or srun, never by hand.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(protean_launcher::proxy::main(args));
}
