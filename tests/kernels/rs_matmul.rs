// A Rust matrix product over flat Vec<f64>s, i-j-k order: the inner k loop reads b with
// stride n; interchanging j and k makes it stride 1.
fn main() {
    // Opaque to the optimizer, so that -O keeps the loops as written.
    let n: usize = std::hint::black_box(16);
    let mut a = vec![0.0f64; n * n];
    let mut b = vec![0.0f64; n * n];
    let mut c = vec![0.0f64; n * n];
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] = ((i * j + 1) % n) as f64 / n as f64 + 1.0 / (i + j + 3) as f64;
            b[i * n + j] = ((i + 2 * j) % n) as f64 / (n + 1) as f64 + 1.0 / (2 * i + j + 7) as f64;
        }
    }
    for i in 0..n {
        // loop i
        for j in 0..n {
            // loop j
            for k in 0..n {
                // loop k
                c[i * n + j] += a[i * n + k] * b[k * n + j];
            }
        }
    }
    let sum: f64 = c.iter().enumerate().map(|(x, v)| v * (x % 7) as f64).sum();
    println!("{sum:e}");
}
