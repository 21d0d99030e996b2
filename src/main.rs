fn main() {
    std::process::exit(sloburn::cli::main());
}
