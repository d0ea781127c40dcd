package actors

import (
	"fmt"

	"golang.org/x/crypto/bcrypt"
)

// hashPassword stores a member's password with bcrypt: slow on purpose, so a
// leaked store does not give passwords away.
func hashPassword(password string) ([]byte, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	return h, nil
}
