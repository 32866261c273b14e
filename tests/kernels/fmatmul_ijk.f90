! A Fortran matrix product in i-j-k order: c(i, j) is kept in a register across the k loop
! at -O2, and the inner loop reads a(i, k) across columns (column-major): interchanging to
! j-k-i makes it stride 1.
program fmatmul_ijk
  implicit none
  integer, parameter :: n = 24
  real(8) :: a(n, n), b(n, n), c(n, n)
  integer :: i, j, k
  do j = 1, n
    do i = 1, n
      a(i, j) = mod(i * 3 + j, 7) * 0.25d0
      b(i, j) = mod(i + j * 5, 11) * 0.5d0
      c(i, j) = 0.0d0
    end do
  end do
  do i = 1, n
    do j = 1, n
      do k = 1, n
        c(i, j) = c(i, j) + a(i, k) * b(k, j)
      end do
    end do
  end do
  print '(z16)', sum(c)
end program fmatmul_ijk
