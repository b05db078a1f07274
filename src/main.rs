fn main() {
    println!("gmcl");
}
