fn main() {
    sloburn::exit::exit_on_panic();
    std::process::exit(sloburn::cli::main());
}
