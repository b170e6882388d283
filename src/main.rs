fn main() -> std::process::ExitCode {
    tickertape::cli::main()
}
