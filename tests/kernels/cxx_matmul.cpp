// A C++ matrix product over std::vector<std::vector<double>>, i-j-k order: the inner k loop
// walks b's rows (stride N); interchanging j and k makes it walk them along (stride 1).
#include <cstdio>
#include <vector>

int main()
{
    const int n = 16;
    std::vector<std::vector<double>> a(n, std::vector<double>(n));
    std::vector<std::vector<double>> b(n, std::vector<double>(n));
    std::vector<std::vector<double>> c(n, std::vector<double>(n, 0.0));
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            a[i][j] = ((i * j + 1) % n) / double(n) + 1.0 / (i + j + 3);
            b[i][j] = ((i + 2 * j) % n) / double(n + 1) + 1.0 / (2 * i + j + 7);
        }
    }
    for (int i = 0; i < n; i++) {             // loop i
        for (int j = 0; j < n; j++) {         // loop j
            for (int k = 0; k < n; k++) {     // loop k
                c[i][j] += a[i][k] * b[k][j];
            }
        }
    }
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            sum += c[i][j] * (i + 1) + j;
    std::printf("%a\n", sum);
    return 0;
}
